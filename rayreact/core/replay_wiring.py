"""Wiring a replay run: its rings, each worker's program, the driver's compiled ops and the DriverPath.

::

    ReplayRun.__init__ (it holds its links and the plan's seed values) ──▶ Wiring(run).start()
        rings: the gather word, per link an inbox, an out ring, a timeline; a ring per worker pair
        programs: per worker reactor, what it runs and where its values come from and go
        ops: per plan position, the driver's guard compiled; the DriverPath (reactor.pyx) that runs them
        start: a REACTOR "start" to each worker; the seed values sent; the ops installed (the guard is live)

A ``Wiring`` lives for the start only and keeps nothing.  It builds into the run's public attributes (the
run's interface to its parts, listed in ReplayRun's docstring) as it goes, so that a start failing half
way leaves the run knowing what to undo: the files in ``paths``, ``gather``, ``started_workers``.
"""

from __future__ import annotations

from . import channel, ids, wire, serialization, submission
from .plan import ANY_POSITION
from .refs import ObjectRef
from .replay_ops import DEOPT, TASK_CALLER, Refused

RING_CAPACITY = 1 << 20
# The longest spins before sleeping (channel.spin_now() cuts them to a few microseconds while the awake
# processes outnumber the cores).  A host process's stepping thread waits for tokens a peer host on the other
# core is about to write: spinning through a reaction or two there saves the futex wake its writer pays and
# the cold start after the sleep (co-located marl_chain: 1,390-1,560 steps/s at 50 us, 1,660-1,680 at
# 300 us); spinning stops paying, and stops (channel.Poller's adaptive spin), where its tokens come later.
# (The setting is the host process's: its guests' own threads, which wait on their doorbells, spin as long.)
# A process per actor spins briefly: with a dozen of them on two cores, the count of awake ones dips under
# the cores often enough that long spins take the cores from the ones at work (marl_chain: 855 against
# 690 steps/s).
DRIVER_SPIN_SECONDS = 50e-6
WORKER_SPIN_SECONDS = 50e-6
HOST_SPIN_SECONDS = 300e-6


class Wiring:
    """Builds one run's rings, programs and ops (``start``)."""

    def __init__(self, run):
        self.run = run
        self.const_ids = {}

    def start(self, trace, seeds, seed_ids, seed_descs, lent_seeds=()):
        run = self.run
        run.bell = run.reactor.replay_bell()
        prefix = f"{run.rt.session_prefix}-r{run.number}"
        self._open_link_rings(prefix)
        readers = self._classify_connections()
        pair_path = self._open_pair_rings(prefix, readers)
        run.pair_paths = pair_path
        programs = self._build_programs(prefix, readers, pair_path)
        self._build_driver_path(readers)
        self._start_workers(programs)
        self._seed(seeds, seed_ids, seed_descs, readers, lent_seeds)
        self._install_ops(trace)

    # ------------------------------------------------------------------ rings and programs
    def _open_link_rings(self, prefix):
        """The gather word, and each link's inbox, ring to the driver and timeline."""
        run = self.run
        run.gather = run.ext.Gather(f"{prefix}-gather", True)
        run.paths.append(run.gather.path)
        for link in run.links.values():
            w = link.w
            link.inbox = self._ring(f"{prefix}-in{w.index}")
            link.bell = _reactor_bell(w)
            link.inbox.reader_bell = None        # the DriverPath rings (or defers) the worker's doorbell
            link.out = self._ring(f"{prefix}-out{w.index}")
            link.out.writer_bell = link.bell
            link.timeline = run.ext.TimelineLog(f"{prefix}-tl{w.index}", True)
            run.paths.append(link.timeline.path)

    def _classify_connections(self):
        """Who writes and who reads each connection, and which are constants (made before the loop): the
        run's ``writer_of`` and ``const_key``; returns the readers of each connection, in order of first use."""
        run = self.run
        conns = run.plan.connections
        # A result no reaction reads goes to the driver, as every result does in dynamic mode: the script may
        # get it now and then (a read off the plan), or keep its ref past the plan's buffering.
        # A value passed nested in an argument (as a ref) goes to the callee, whose get reads it there during
        # the call, and to the driver, which keeps it in the dynamic table for a callee that keeps the ref
        # (core.replay_nested).
        # A pool's reader is each of its members (any may run the call that reads it).
        members = run.plan.members
        readers = {c.id: list(dict.fromkeys(x for u in c.uses
                                            for x in ((u.reactor, "driver") if u.passing == "ref" else (u.reactor,))
                                            for x in members(x)))
                   or (["driver"] if c.source == "period" and c.reactor != "driver" else []) for c in conns}
        # A pool's results: which member made one, the DriverPath knows per call (``pool_writer``).
        run.writer_of = {c.id: c.reactor for c in conns}
        run.driver_reads = frozenset(cid for cid, rs in readers.items() if "driver" in rs)
        run.const_key = {}
        for c in conns:
            if c.source == "prefix":
                run.const_key[c.id] = (c.id, c.producer)
            elif c.source == "external":
                run.const_key[c.id] = (c.id, -1 - c.producer)
        return readers

    def _open_pair_rings(self, prefix, readers):
        """A ring per (writer, reader) pair of workers; returns their paths.  Created here, opened by the
        workers: the driver never reads or writes them."""
        links = self.run.links
        pair_path = {}
        for c in self.run.plan.connections:
            if c.reactor == "driver":
                continue
            for reader in readers[c.id]:
                if reader not in ("driver", c.reactor):
                    key = (c.reactor, reader)
                    if key not in pair_path:
                        pair_path[key] = f"{prefix}-p{links[c.reactor].w.index}-{links[reader].w.index}"
                        self._ring(pair_path[key]).close()
        return pair_path

    def _build_programs(self, prefix, readers, pair_path):
        """What each worker's reactor runs, by reactor name."""
        run = self.run
        run.spin = DRIVER_SPIN_SECONDS
        return {name: self._program_for(name, link, prefix, readers, pair_path) for name, link in run.links.items()}

    def _program_for(self, name, link, prefix, readers, pair_path):
        run = self.run
        plan, P = run.plan, run.P
        r = plan.reactor(name)
        in_rings, out_rings, out_readers = self._rings_of(name, link, pair_path)
        out_index = {reader: i for i, reader in enumerate(out_readers)}
        steps, writers, keep = self._steps_of(r, link)
        routes = {}
        task_reactors = {x.name for x in plan.reactors if x.kind == "task"}
        for q in r.schedule:
            for cid in plan.reactions[q].outputs:
                rs = readers[cid]
                # Kept for a deopt's handover when the driver never sees it, and for a rerun of a task call
                # that reads it, should the task's lent worker die (the driver may have dropped its own copy).
                retain = "driver" not in rs or any(x in task_reactors for x in rs)
                routes[cid] = (name in rs, tuple(out_index[x] for x in rs if x != name), retain)
        host_bell = _stepping_bell(link.w)
        return run.ext.Program(
            plan=run.number, name=name, period=P, start=plan.start, steps=steps, routes=routes,
            writers=writers, in_rings=in_rings, out_rings=out_rings, out_readers=out_readers,
            host_bell=host_bell.path if host_bell is not None else None,
            const_conns=frozenset(run.const_key),
            keep=keep + P, retain=(run.R + 1) * P, shm_prefix=f"{prefix}-w{link.w.index}",
            timeline=link.timeline.path, gather=run.gather.path,
            spin=HOST_SPIN_SECONDS if host_bell is not None else WORKER_SPIN_SECONDS,
            pool_limit=serialization.segment_pool.limit, dynamic_spin=run.rt.spin_seconds)

    def _rings_of(self, name, link, pair_path):
        """A worker's rings in (path, bell to ring) and out, and the reader of each out ring."""
        links = self.run.links
        in_rings = [(link.inbox.path, self.run.bell.path)]
        out_rings = [(link.out.path, None)]          # to the driver: Gather wakes it, once per gather
        for (writer, reader), path in pair_path.items():
            if reader == name:
                in_rings.append((path, _reactor_bell(links[writer].w).path))
        out_readers = ["driver"]
        for (writer, reader), path in pair_path.items():
            if writer == name:
                out_readers.append(reader)
                out_rings.append((path, _reactor_bell(links[reader].w).path))
        return in_rings, out_rings, out_readers

    def _steps_of(self, r, link):
        """Per position a worker runs: what it calls, where each argument comes from, what it makes; the
        writer of each connection it reads, and how many positions back it must keep values."""
        run = self.run
        plan, P, ext = run.plan, run.P, run.ext
        conns = plan.connections
        steps, writers, keep = {}, {}, P
        for q in r.schedule:
            reaction = plan.reactions[q]
            specs, slot = [], 0
            for a in reaction.args:
                if a.input is None:
                    specs.append((a.name, ext.A_LITERAL, slot, 0))
                    slot += 1
                    continue
                c = conns[a.input.connection]
                writers[c.id] = c.reactor
                if c.source == "relay":
                    # The driver writes it before the invocation, keyed by the call's own index.
                    specs.append((a.name, ext.A_PERIOD, c.id, 0))
                elif c.id in run.const_key:
                    specs.append((a.name, ext.A_CONST, c.id, run.const_key[c.id][1]))
                else:
                    d = a.input.lag * P + q - c.producer
                    keep = max(keep, d + P)
                    specs.append((a.name, ext.A_PERIOD, c.id, d))
            for a in reaction.args:
                for inp in a.nested:       # values lent as refs: read while the call runs (replay_nested)
                    c = conns[inp.connection]
                    if c.id not in run.const_key:
                        writers[c.id] = c.reactor
                        keep = max(keep, inp.lag * P + q - c.producer + P)
            if reaction.op == "task":
                fn = run.task_of[reaction.target][1]
                method, display = submission.code_id_of(fn), fn._function_name
            else:
                method, display = reaction.target, f"{link.actor.class_name}.{reaction.target}"
            steps[q] = ext.Step(method, tuple(specs), tuple(reaction.outputs), display)
        return steps, writers, keep

    # ------------------------------------------------------------------ the driver's side, and the start
    def _build_driver_path(self, readers):
        """The per-position driver ops (the guard, compiled) and the DriverPath that runs them per call."""
        run = self.run
        run.poller = channel.Poller(run.bell)
        run.poller.set_rings([link.out for link in run.links.values()])
        run.ops = [self._compile(run.plan.reactions[q], readers) for q in range(run.P)]
        run.fast = run.ext.DriverPath(
            run, [], run.plan.start, run.P, run.first, [(link, link.out) for link in run.links.values()],
            run.gather, run.spin, frozenset(run.const_key), run.writer_of, ObjectRef, ids.new_id, DEOPT,
            run.poller)
        run.fast.pool_names = frozenset(pool.name for pool in run.plan.pools)
        run.fast.block_starts = frozenset(run.plan.blocks)
        run.fast.lend_positions = frozenset(run.nested.put_readers)
        run.fast.made_before = run.made_before

    def _start_workers(self, programs):
        # Under the runtime's lock: each reactor starts after every dynamic message already sent to it.
        run = self.run
        rt = run.rt
        with rt.lock:
            run.started_workers = True
            for name, link in run.links.items():
                rt.send_to_worker(link.w, wire.Reactor("start", programs[name]))

    def _seed(self, seeds, seed_ids, seed_descs, readers, lent_seeds):
        """Send the values the plan starts from to their readers; the script's refs to them are the run's
        (also those of ``lent_seeds``, values the plan only passes on as refs: they are sent nowhere)."""
        run = self.run
        conns = run.plan.connections
        run.windows.append((run.first, []))
        for seed, oid in lent_seeds:
            if seed.connection not in run.const_key:
                run.given[(seed.producer, seed.ret)] = oid
                run.windows[-1][1].append((seed.producer, seed.ret, seed.connection))
        for seed, oid, desc in zip(seeds, seed_ids, seed_descs):
            c = conns[seed.connection]
            key = (c.id, seed.producer)
            for reader in readers[c.id]:
                if reader == "driver":
                    run.cache[key] = self._token_of_desc(desc)
                else:
                    run.send_desc(run.links[reader], c.id, seed.producer, desc)
            if c.id not in run.const_key:
                run.given[(seed.producer, seed.ret)] = oid
                run.windows[-1][1].append((seed.producer, seed.ret, c.id))

    def _install_ops(self, trace):
        """Bind each constant read to its ref id and give the DriverPath its ops: the guard is live."""
        run = self.run
        conns = run.plan.connections
        self.const_ids = {cid: trace.ref_id(key[1], conns[cid].ret) for cid, key in run.const_key.items()}
        run.const_ids = self.const_ids
        for op in run.ops:
            self._bind_consts(op)
        run.fast.ops = list(run.ops)

    # ------------------------------------------------------------------ compile helpers
    def _ring(self, path):
        run = self.run
        ring = channel.Ring(path, RING_CAPACITY, True)
        run.paths.append(path)
        run.ring_paths.append(path)
        return ring

    def _compile(self, reaction, readers):
        """The reactor.Op of one position: the plan's reaction, as the driver runs it."""
        run = self.run
        ext = run.ext
        q = reaction.position
        kind = {"actor_method": ext.CALL, "task": ext.CALL, "put": ext.PUT, "get": ext.GET,
                "wait": ext.WAIT}.get(reaction.op)
        if kind is None:
            raise Refused(f"position {q}: {reaction.op} is not replayed")
        op = ext.Op(kind, q)
        P = run.P
        conns = run.plan.connections
        const_key = run.const_key

        def read(inp):
            c = conns[inp.connection]
            if c.id in const_key:
                return (c.id, None, c.ret, const_key[c.id])
            if c.source == "relay" and c.producer == ANY_POSITION:
                # Any value the driver holds (a plan of blocks, from block to block).
                return (c.id, run.ext.RELAYED, c.ret, None, ANY_POSITION, -1)
            if c.source == "relay":
                # Any result of position ``c.producer`` (checked by the ref's maker, then relayed).
                return (c.id, run.ext.RELAYED, c.ret, None, c.producer, run.plan.reactions[c.producer].outputs[c.ret])
            return (c.id, inp.lag * P + q - c.producer, c.ret, None)

        if kind == ext.CALL:
            members = run.plan.members(reaction.reactor)
            link = run.links[members[0]]
            op.link = link
            op.inflight = link.inflight
            if len(members) > 1 or reaction.reactor.startswith("pool:"):
                op.pool = {run.links[m].actor.actor_id: run.links[m] for m in members}
            op.relayed = any(c.source == "relay" and c.producer in (q, ANY_POSITION) for c in conns)
            if reaction.op == "task":
                op.actor = TASK_CALLER
                op.method = run.task_of[reaction.target][0]
            else:
                op.actor = link.actor.actor_id
                op.method = reaction.target
            op.outputs = tuple(reaction.outputs)
            op.feeds_workers = any(x != "driver" for cid in reaction.outputs for x in readers[cid])
            op.nret = len(reaction.outputs)
            positional = [a for a in reaction.args if not isinstance(a.name, str)]
            op.nargs = len(positional)
            op.kwnames = tuple(a.name for a in reaction.args if isinstance(a.name, str))
            op.specs = tuple(None if a.input is None else read(a.input) for a in reaction.args)
            if op.inflight is not None:
                fed = tuple(a.input is not None and conns[a.input.connection].reactor != "driver"
                            for a in reaction.args)
                op.worker_fed = fed if any(fed) else None
            op.label = (run.task_of[reaction.target][1]._function_name.rsplit(".", 1)[-1] if reaction.op == "task"
                        else f"{link.actor.class_name}.{reaction.target}")
        elif kind == ext.PUT:
            op.conn = reaction.outputs[0]
            op.readers = tuple(run.links[x] for x in readers[op.conn] if x != "driver")
            op.label = "put"
        else:
            op.reads = tuple(read(i) for i in reaction.reads)
            op.label = reaction.op
        expect = run.plan.guard.expects[q].signature
        if reaction.op == "get":
            op.timeout = expect[3]
        elif reaction.op == "wait":
            op.num_returns, op.timeout = expect[2], expect[3]
        return op

    def _bind_consts(self, op):
        # Constant reads name a fixed ref id: (conn, None, ret, const key) -> (conn, None, ret, (key, id)).
        const_ids = self.const_ids
        ext = self.run.ext
        if op.kind == ext.CALL:
            op.specs = tuple(s if s is None or s[3] is None else (s[0], None, s[2], (s[3], const_ids[s[0]]))
                             for s in op.specs)
        elif op.kind in (ext.GET, ext.WAIT):
            op.reads = tuple(s if s[3] is None else (s[0], None, s[2], (s[3], const_ids[s[0]]))
                             for s in op.reads)

    def _token_of_desc(self, desc):
        ext = self.run.ext
        flags = ext.F_ERROR if desc[3] else 0
        if desc[0] == serialization.SEGMENT:
            return ext.Token(flags, self.run.rt.object_table.view_segment(desc[1]))
        return ext.Token(flags, desc[1])


def _stepping_bell(w):
    """The doorbell of the host whose stepping thread runs ``w``'s reactions (a guest, or a host lent to task
    calls: core.reactor.HostReactor), else None."""
    return w.host.stepping_bell if w.host is not None else w.stepping_bell


def _reactor_bell(w):
    """The doorbell that wakes ``w``'s reactor."""
    return _stepping_bell(w) or w.bell
