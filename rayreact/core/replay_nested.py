"""Refs nested in a replayed call's arguments or put: passed to the callee as refs, as Ray passes them.

::

    record: Reactor._record_submit ── nested_ref_ids(args, kwargs) ──▶ the trace's Literal.nested
    replay: DriverPath.call, a literal argument pickles refs ──▶ NestedRefs.frame
        each ref the one the plan names at this position (the same scan as recording)? ── no ──▶ None:
        │                                                                          the call deviates
        a ref this run made, which the dynamic table lacks ──▶ reserved there, PENDING; its connection
        │      is routed to the driver too (replay_wiring), so the value comes, and fills the entry as it
        │      does (the DriverPath's store hook ──▶ ``came``), or at once if it is here already
        every nested ref lent to the callee's worker, as a dynamic call lends them (the worker gives each
        back when it drops it); the invocation (INVOKE payload kind 3) names them so the worker counts them,
        and says where the worker's own copy of each value comes from

    put:  a put whose value nests refs (small: inline) ── the same check (``put_refs``) ──▶ an entry of the
          dynamic table as well (``keep_put``), which keeps the nested refs as a dynamic put does; each call
          reading it by value (``put_readers``) gets an invocation of kind 3 lending them, with no local copies

While the call runs, the callee's ``ray.get`` of such a ref reads the worker's own copy, sent by the
producer as an argument would be (``Worker.replay_values``; the reaction waits for it before it starts, as
for its other inputs).  A threaded or async actor's calls overlap, so theirs go to the driver's dynamic
runtime, as does a get of a ref the callee kept past the call: the service thread answers once the entry is
filled.  A value stays in the dynamic table as long
as the script's refs or a worker's borrow keep it, past the plan's buffering.  On a deviation, the
hand-over fills the entries still pending (``pending``).  Reaches the run only through its public
interface (``plan``, ``P``, ``start``, ``given``, ``cache``, ``const_ids``, ``rt``, ``ext``, ``fast``,
``reap_arg_files``), the runtime through ``lock`` and ``object_table``.
"""

from __future__ import annotations

import pickle

from .. import exceptions
from . import ids, serialization
from .refs import ObjectRef

# How deep in plain containers a nested ref is looked for, and how big a container is searched: the same
# when recording and when checking a replayed call, so the two agree on which refs a call nests.
SCAN_DEPTH = 2
SCAN_LIMIT = 1024


def nested_ref_ids(args, kwargs):
    """Ids of refs nested in plain containers, per argument (position or keyword); None if none."""
    found = None
    items = list(enumerate(args))
    if kwargs:
        items += list(kwargs.items())
    for key, value in items:
        if type(value) is ObjectRef:
            continue
        refs = []
        scan(value, refs, 0)
        if refs:
            if found is None:
                found = {}
            found[key] = refs
    return found


def scan(value, out, depth):
    """Append to ``out`` the ids of refs in ``value``, ``SCAN_DEPTH`` levels of lists, tuples, sets and dict
    values deep, in iteration order (the order pickling meets them)."""
    kind = type(value)
    if kind is ObjectRef:
        out.append(value._id)
    elif depth < SCAN_DEPTH and kind in (list, tuple, set, frozenset) and len(value) <= SCAN_LIMIT:
        for v in value:
            scan(v, out, depth + 1)
    elif depth < SCAN_DEPTH and kind is dict and len(value) <= SCAN_LIMIT:
        for v in value.values():
            scan(v, out, depth + 1)


def take_descriptor(tok):
    """A token's descriptor for the object table, which takes its file over."""
    desc = tok.descriptor()
    tok.path = None
    return desc


class NestedRefs:
    """The run's calls that nest refs in their arguments: ``frame`` builds each one's invocation."""

    def __init__(self, run):
        self.run = run
        # Per call position that nests refs: per literal argument (in order), the plan's Inputs nested in it.
        self.expected = {}
        self.local = set()                # positions whose worker serves the call's gets of them itself
        self.put_contained = {}           # (connection, index) of a put nesting refs -> the ids it nests
        for reaction in run.plan.reactions:
            literal_args = [a.nested for a in reaction.args if a.input is None]
            if any(literal_args):
                self.expected[reaction.position] = literal_args
                if not any(run.plan.reactor(m).concurrent for m in run.plan.members(reaction.reactor)):
                    self.local.add(reaction.position)
        # Puts whose value nests refs: per put position, the plan's Inputs nested in it; per position of a call
        # that reads such a put by value, the (connection, distance) of each (its worker unpickles the refs).
        self.put_nests = {r.position: [r.reads] for r in run.plan.reactions if r.op == "put" and r.reads}
        nesting = {r.outputs[0]: r.position for r in run.plan.reactions if r.position in self.put_nests}
        self.put_readers = {}
        for reaction in run.plan.reactions:
            for a in reaction.args:
                if a.input is not None and a.input.connection in nesting:
                    d = a.input.lag * run.P + reaction.position - nesting[a.input.connection]
                    self.put_readers.setdefault(reaction.position, []).append((a.input.connection, d))
        # Connections only ever passed on nested (as refs): a value made before the run need not be ready, nor
        # sent anywhere, for replay to begin (Ray does not wait for a ref it only passes).
        self.ref_only = frozenset(c.id for c in run.plan.connections
                                  if c.uses and all(u.passing == "ref" for u in c.uses))

    def _match(self, idx, q, values, expected, ser):
        """The refs this run made among those nested in ``values`` (pickled as ``ser``), as
        ``[(oid, (connection, producer index))]``; None unless they are the refs the plan names at ``q``."""
        if len(expected) != len(values):
            return None
        run = self.run
        found_all = []
        made = []
        conns = run.plan.connections
        given = run.given
        for value, inputs in zip(values, expected):
            found = []
            scan(value, found, 0)
            if len(found) != len(inputs):
                return None
            for oid, inp in zip(found, inputs):
                c = conns[inp.connection]
                if c.source != "period":
                    if run.const_ids.get(c.id) != oid:
                        return None
                    continue
                producer = idx - (inp.lag * run.P + q - c.producer)
                if given.get((producer, c.ret)) != oid:
                    return None
                made.append((oid, (c.id, producer)))
            found_all.extend(found)
        if set(ser.contained) != set(found_all):
            return None                    # a ref deeper than the scan (or a set's order): not the plan's
        return made

    def frame(self, idx, literals, ser, link):
        """The INVOKE frame of the call at ``idx`` whose ``literals`` (pickled as ``ser``) nest refs, or that
        reads a put nesting refs; None if they are not the refs the plan names here (the call then
        deviates)."""
        run = self.run
        q = (idx - run.start) % run.P
        made = []                          # (oid, (connection, producer index)) of refs this run made
        if ser.contained:
            expected = self.expected.get(q)
            made = None if expected is None else self._match(idx, q, literals, expected, ser)
            if made is None:
                return None
        contained = list(ser.contained)
        for conn, d in self.put_readers.get(q, ()):
            # The worker unpickles the put's nested refs as it reads the value: lent to it, as for a literal's.
            nests = self.put_contained.get((conn, idx - d))
            if nests is None:
                return None                # a put this run did not make (or forgot): the dynamic way
            contained.extend(nests)
        # Where the callee's worker finds each value it reads while the call runs: its own copy, sent by the
        # producer as for an argument, of a value made in the run.  A threaded or async actor's calls overlap,
        # so they ask the driver, as a get of a value made before the run does.
        local = ([(oid, key[0], key[1]) for oid, key in made if key[1] >= run.first] if q in self.local else [])
        ext = run.ext
        if not literals:
            body = (0, None, contained, local)
        elif ser.size <= serialization.INLINE_LIMIT:
            body = (1, ser.pack(), contained, local)
        else:
            run.reap_arg_files()
            path = f"{run.rt.session_prefix}-ra{ids.new_id().hex()}"
            ser.write_segment(path)
            link.arg_files.append((idx, path))
            body = (2, path, contained, local)
        if not self._lend(made, contained, link):
            return None                    # its worker died: the call goes the dynamic way, which says so
        return ext.INVOKE_HEADER.pack(ext.INVOKE, idx, ext.INVOKE_WITH_REFS) + pickle.dumps(body, protocol=5)

    def _lend(self, made, contained, link):
        """Make each ref reachable through the dynamic table, and lend them all to ``link``'s worker; False if
        that worker has died (nothing is lent then: its borrows would never be given back)."""
        rt = self.run.rt
        with rt.lock:
            if link.dead or link.w.dead:
                return False
            self._reach(made)
            rt.object_table.lend(link.w.index, contained)
        return True

    def _reach(self, made):
        """Each ref this run made, reachable through the dynamic table (its value there now, or once it comes)."""
        run = self.run
        table = run.rt.object_table
        adopting = run.fast.adopting
        for oid, key in made:
            if oid in table:
                continue
            table.reserve(oid)
            tok = run.cache.get(key)
            if tok is not None:
                table.fill(oid, self._descriptor(oid, tok))
            else:
                adopting[key] = oid

    def put_refs(self, idx, value, ser):
        """The refs this run made among those nested in the put at ``idx`` of ``value`` (pickled as ``ser``);
        None if they are not the refs the plan names there (the put then deviates)."""
        q = (idx - self.run.start) % self.run.P
        return self._match(idx, q, [value], self.put_nests.get(q, ()), ser)

    def keep_put(self, idx, oid, made, ser):
        """The put at ``idx`` is ``oid``, nesting ``made`` (``put_refs``) and others: an entry of the dynamic
        table too, as a dynamic put is, so that it keeps its nested refs while the script or a worker holds
        it (``holds``), however soon the script drops the refs themselves.  Each call that reads it has them
        lent to its worker (``frame``)."""
        run = self.run
        rt = run.rt
        with rt.lock:
            self._reach(made)
            rt.object_table.reserve(oid)
            rt.object_table.fill(oid, (serialization.INLINE, ser.inline(), list(ser.contained), False))
        q = (idx - run.start) % run.P
        self.put_contained[(run.plan.reactions[q].outputs[0], idx)] = list(ser.contained)

    def forget_puts(self, horizon):
        """Puts made before index ``horizon`` are read by no call any more."""
        if self.put_contained:
            for key in [k for k in self.put_contained if k[1] < horizon]:
                del self.put_contained[key]

    def came(self, oid, tok):
        """The value of a nested ref the dynamic table waits for came to the driver (the store hook)."""
        rt = self.run.rt
        rt.object_table.fill_all(((oid, self._descriptor(oid, tok)),))
        rt.bell.ring()                     # a get through the runtime may wait for it

    def writer_died(self, name, payload):
        """The worker of reactor ``name`` died: the values it had still to make for the dynamic table are its
        death error (a callee waits for them there)."""
        run = self.run
        adopting = run.fast.adopting
        lost = [key for key in adopting if run.writer_at(key) == name]
        if not lost:
            return
        desc = (serialization.INLINE, payload, [], True)
        run.rt.object_table.fill_all([(adopting.pop(key), desc) for key in lost])
        run.rt.bell.ring()

    def _descriptor(self, oid, tok):
        if oid in self.run.fast.cancelled:
            # ray.cancel named the call before it finished: every get of its result raises, as the driver's does.
            err = serialization.serialize(exceptions.TaskCancelledError(), is_error=True).pack()
            return (serialization.INLINE, err, [], True)
        return take_descriptor(tok)

    def pending(self):
        """(oid, key) of the nested refs whose values have not come yet (the hand-over fills them)."""
        return [(oid, key) for key, oid in self.run.fast.adopting.items()]
