"""Application errors: how a remote exception reaches the caller, and bad input rejected at submission.

``get`` raises an exception that is both a ``RayTaskError`` and an instance of
the user's class, carries the remote traceback in its text and the original
exception as ``.cause``; dependants of a failed task fail with the same class.
"""

import threading

import pytest
from conftest import backend_fixture

ray_backend = backend_fixture(replay=True, colocate=True)


class CustomError(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code

    def __reduce__(self):  # the default would call CustomError(message) and lose ``code``
        return CustomError, (self.args[0], self.code)


def fail_with_custom(message="kaboom"):
    raise CustomError(message, 7)


class Flaky:
    """Actor whose ``fail`` raises but leaves the actor alive and its state intact."""

    def __init__(self):
        self.calls = 0

    def fail(self):
        self.calls += 1
        raise KeyError("missing")

    def count(self):
        self.calls += 1
        return self.calls

    def echo(self, value):
        return value


class Keeper:
    def __init__(self, value):
        self.value = value


def test_task_error_is_both_ray_task_error_and_user_class(ray_backend):
    ref = ray_backend.remote(fail_with_custom).remote()
    with pytest.raises(CustomError) as info:
        ray_backend.get(ref)
    err = info.value
    assert isinstance(err, ray_backend.exceptions.RayTaskError)
    assert isinstance(err, ray_backend.exceptions.RayError)
    assert isinstance(err, CustomError)


def test_task_error_carries_remote_traceback_text(ray_backend):
    with pytest.raises(ray_backend.exceptions.RayTaskError) as info:
        ray_backend.get(ray_backend.remote(fail_with_custom).remote("boom-message"))
    text = str(info.value)
    assert "fail_with_custom" in text
    assert "boom-message" in text
    assert "CustomError" in text
    assert "test_errors.py" in text  # a frame of the remote traceback


def test_traceback_of_code_pickled_by_value_shows_its_file_line_and_source(ray_backend):
    def divide_by_zero_here(x):           # defined in the test: shipped by value, not by module name
        return x / 0

    with pytest.raises(ray_backend.exceptions.RayTaskError) as info:
        ray_backend.get(ray_backend.remote(divide_by_zero_here).remote(1))
    text = str(info.value)
    assert f'File "{__file__}"' in text
    assert "return x / 0" in text
    assert "<dynamic-code>" not in text


def test_task_error_cause_is_the_user_exception(ray_backend):
    with pytest.raises(ray_backend.exceptions.RayTaskError) as info:
        ray_backend.get(ray_backend.remote(fail_with_custom).remote("why"))
    cause = info.value.cause
    assert type(cause) is CustomError
    assert cause.args == ("why",) and cause.code == 7


def test_builtin_exception_class_is_preserved(ray_backend):
    def divide(a, b):
        return a / b

    with pytest.raises(ZeroDivisionError) as info:
        ray_backend.get(ray_backend.remote(divide).remote(1, 0))
    assert isinstance(info.value, ray_backend.exceptions.RayTaskError)


def test_error_is_raised_at_get_not_at_submission(ray_backend):
    ref = ray_backend.remote(fail_with_custom).remote()
    assert isinstance(ref, ray_backend.ObjectRef)
    ready, _ = ray_backend.wait([ref], timeout=60)
    assert ready == [ref]  # a failed task counts as finished for wait
    for _ in range(2):  # and the error is kept, raised on every get
        with pytest.raises(CustomError):
            ray_backend.get(ref)


def test_error_in_list_get_raises(ray_backend):
    good = ray_backend.put(1)
    bad = ray_backend.remote(fail_with_custom).remote()
    with pytest.raises(CustomError):
        ray_backend.get([good, bad])


def test_error_propagates_through_dependent_tasks(ray_backend):
    inc = ray_backend.remote(lambda x: x + 1)
    ref = inc.remote(inc.remote(ray_backend.remote(fail_with_custom).remote("root cause")))
    with pytest.raises(CustomError) as info:
        ray_backend.get(ref)
    assert isinstance(info.value, ray_backend.exceptions.RayTaskError)
    assert "root cause" in str(info.value)


def test_error_propagates_into_actor_call(ray_backend):
    flaky = ray_backend.remote(Flaky).remote()
    ref = flaky.echo.remote(ray_backend.remote(fail_with_custom).remote())
    with pytest.raises(CustomError):
        ray_backend.get(ref)
    assert ray_backend.get(flaky.count.remote()) == 1


def test_nested_failed_ref_is_passed_not_raised(ray_backend):
    bad = ray_backend.remote(fail_with_custom).remote()

    def inspect(box):
        try:
            ray_backend.get(box[0])
        except CustomError as e:
            return "caught", isinstance(e, ray_backend.exceptions.RayTaskError)
        return "no error"

    assert ray_backend.get(ray_backend.remote(inspect).remote([bad])) == ("caught", True)


def test_error_caught_inside_a_task(ray_backend):
    def catch():
        try:
            ray_backend.get(ray_backend.remote(fail_with_custom).remote())
        except CustomError as e:
            return isinstance(e, ray_backend.exceptions.RayTaskError), e.cause.code
        return None

    assert ray_backend.get(ray_backend.remote(catch).remote()) == (True, 7)


def test_actor_method_error_keeps_actor_alive(ray_backend):
    flaky = ray_backend.remote(Flaky).remote()
    with pytest.raises(KeyError) as info:
        ray_backend.get(flaky.fail.remote())
    assert isinstance(info.value, ray_backend.exceptions.RayTaskError)
    assert "Flaky" in str(info.value) and "fail" in str(info.value)
    assert ray_backend.get(flaky.count.remote()) == 2


def test_application_errors_are_not_retried_by_default(ray_backend):
    counter = ray_backend.remote(Flaky).remote()

    def count_then_fail(c):
        ray_backend.get(c.count.remote())
        raise ValueError("once")

    with pytest.raises(ValueError):
        ray_backend.get(ray_backend.remote(max_retries=3)(count_then_fail).remote(counter))
    assert ray_backend.get(counter.count.remote()) == 2


def test_retry_exceptions_retries_application_errors(ray_backend):
    counter = ray_backend.remote(Flaky).remote()

    def fail_twice(c):
        if ray_backend.get(c.count.remote()) <= 2:
            raise ValueError("not yet")
        return "third time"

    task = ray_backend.remote(max_retries=3, retry_exceptions=True)(fail_twice)
    assert ray_backend.get(task.remote(counter), timeout=120) == "third time"
    assert ray_backend.get(counter.count.remote()) == 4


# --- bad input at submission -------------------------------------------------------------


def test_unpicklable_argument_is_a_clear_type_error(ray_backend):
    f = ray_backend.remote(lambda x: x)
    with pytest.raises(TypeError) as info:
        f.remote(threading.Lock())
    text = str(info.value).lower()
    assert "serialize" in text and "lock" in text


def test_unpicklable_put_is_a_clear_type_error(ray_backend):
    with pytest.raises(TypeError) as info:
        ray_backend.put({"lock": threading.Lock()})
    text = str(info.value).lower()
    assert "serialize" in text and "lock" in text


def test_unpicklable_actor_argument_is_a_clear_type_error(ray_backend):
    holder = ray_backend.remote(Flaky).remote()
    with pytest.raises(TypeError) as info:
        holder.echo.remote(threading.Lock())
    assert "lock" in str(info.value).lower()
    # The rejected call was never submitted.
    assert ray_backend.get(holder.count.remote()) == 1


def test_unpicklable_constructor_argument_is_a_clear_type_error(ray_backend):
    keeper = ray_backend.remote(Keeper)
    with pytest.raises(TypeError) as info:
        keeper.remote(threading.Lock())
    assert "lock" in str(info.value).lower()


def test_unpicklable_return_value_is_an_error_at_get(ray_backend):
    with pytest.raises(ray_backend.exceptions.RayError) as info:
        ray_backend.get(ray_backend.remote(lambda: threading.Lock()).remote())
    assert "lock" in str(info.value).lower()


def test_runtime_still_usable_after_bad_submission(ray_backend):
    f = ray_backend.remote(lambda x: x * 2)
    with pytest.raises(TypeError):
        f.remote(threading.Lock())
    with pytest.raises(TypeError):
        f.remote()
    assert ray_backend.get(f.remote(21)) == 42


def _with_defaults(a, b=1, *rest, scale=1):
    return (a + b + sum(rest)) * scale


def _keyword_only(a, *, k):
    return a + k


def test_arity_is_checked_at_submission_for_every_parameter_kind(ray_backend):
    plain = ray_backend.remote(_with_defaults)
    assert ray_backend.get([plain.remote(1), plain.remote(1, 2, 3, 4), plain.remote(1, scale=2)]) == [2, 10, 4]
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        plain.remote()
    keyword = ray_backend.remote(_keyword_only)
    with pytest.raises(TypeError, match="missing a required argument: 'k'"):
        keyword.remote(1)
    with pytest.raises(TypeError, match="too many positional arguments"):
        keyword.remote(1, 2)
    assert ray_backend.get(keyword.remote(1, k=2)) == 3


def test_actor_method_arity_is_checked_at_submission(ray_backend):
    holder = ray_backend.remote(Flaky).remote()
    with pytest.raises(TypeError, match="too many positional arguments"):
        holder.echo.remote(1, 2)
    with pytest.raises(TypeError, match="missing a required argument"):
        holder.echo.remote()
    assert ray_backend.get(holder.echo.remote(5)) == 5
