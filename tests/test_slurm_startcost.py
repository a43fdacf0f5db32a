"""Start costs the Slurm controller learns and charges (policyopt.slurm.startcost) and the pinned
round choice (policyopt.slurm.schedule.keep_pinned), without Slurm."""
from __future__ import annotations

import pytest

from policyopt.slurm.schedule import choose_configuration, choose_with_pins, deviation_limit, fill_order, keep_pinned
from policyopt.slurm.startcost import StartupModel, pinned_jobs, startup_per_start, steps_done


def test_startup_per_start_and_steps_done() -> None:
    # 60 steps at 4 steps/s on v100 take 15 s; 25 s RUNNING over 2 starts: 5 s per start
    assert startup_per_start({"v100": 25.0}, 60, {"v100": 4.0, "k80": 3.0}, 2) == pytest.approx(5.0)
    # two types: 10 s on v100 (4/s) + 10 s on k80 (2/s): v̄ = 3, 45 steps take 15 s of the 20: 5 s in 1 start
    assert startup_per_start({"v100": 10.0, "k80": 10.0}, 45, {"v100": 4.0, "k80": 2.0}, 1) == pytest.approx(5.0)
    assert startup_per_start({"v100": 10.0}, 60, {"v100": 4.0}, 1) == 0.0  # never below 0
    assert startup_per_start({}, 60, {"v100": 4.0}, 0) == 0.0
    # and back: 20 s RUNNING with 5 s of one start not stepping -> 45 of the 60 work-steps
    assert steps_done({"v100": 10.0, "k80": 10.0}, {"v100": 4.0, "k80": 2.0}, 1, 5.0) == pytest.approx(45.0)
    assert steps_done({"v100": 4.0}, {"v100": 4.0}, 1, 5.0) == 0.0  # still starting
    assert steps_done({"v100": 4.0}, {"v100": 4.0}, 1, 0.0) == 16.0  # nothing charged: the old estimate


def test_startup_model_learns_per_type_with_a_fallback() -> None:
    model = StartupModel()
    assert model.estimate("a") == 0.0  # nothing learned yet
    model.observe("a", 10.0)
    model.observe("a", 14.0)
    model.observe("b", 6.0)
    assert model.estimate("a") == pytest.approx(12.0) and model.estimate("b") == pytest.approx(6.0)
    assert model.estimate("c") == pytest.approx(10.0)  # a type not seen yet: the mean over all jobs
    again = StartupModel.from_state(model.to_state())
    assert again.estimate("a") == pytest.approx(12.0) and again.sums == model.sums


def test_pinned_jobs_rules() -> None:
    running = {"young": "v100", "old": "v100", "ending": "k80", "free": "k80"}
    age = {"young": 15.0, "old": 30.0, "ending": 30.0, "free": 30.0}
    remaining = {"young": 100.0, "old": 100.0, "ending": 20.0}
    restart = dict.fromkeys(running, 10.0)
    assert pinned_jobs(running, age, remaining, restart) == {"young": "v100", "ending": "k80"}
    assert pinned_jobs(running, age, remaining, dict.fromkeys(running, 0.0)) == {}  # r = 0: the old choice
    # near its end only while what is left fits in one round: 20 s left is more than a 10 s round
    assert pinned_jobs(running, age, remaining, restart, round_length=10.0) == {"young": "v100"}
    assert pinned_jobs(running, age, remaining, restart, round_length=20.0) == {"young": "v100", "ending": "k80"}


def test_keep_pinned_rewrites_configurations_that_fit() -> None:
    gpus = {"a": 2, "b": 4, "c": 1, "d": 1}
    cap = {"v100": 4, "k80": 4}
    confs = [[("a", "k80"), ("b", "v100")], [("b", "k80"), ("c", "v100"), ("d", "v100")]]
    assert keep_pinned(confs, {}, gpus, cap) == confs
    out = keep_pinned(confs, {"a": "v100"}, gpus, cap, fill=[("c", "k80"), ("d", "k80")])
    # a stays on v100; b cannot join it there (2 + 4 > 4), so c and d fill the free k80s; the second
    # configuration keeps b on k80, c and d join a on v100 (2 + 1 + 1 = 4 GPUs)
    assert out == [[("a", "v100"), ("c", "k80"), ("d", "k80")], [("a", "v100"), ("b", "k80"), ("c", "v100"),
                                                                 ("d", "v100")]]
    for conf in out:  # every rewritten configuration fits
        for t in cap:
            assert sum(gpus[j] for j, tt in conf if tt == t) <= cap[t]
    # a pinned job that no longer fits (its type lost GPUs) is not kept
    assert keep_pinned([[("c", "v100")]], {"b": "v100"}, gpus, {"v100": 2, "k80": 4}) == [[("c", "v100")]]


def _two_jobs_taking_turns(restart_known: float, startup: float = 12.0, length: float = 5.0,
                           rounds: int = 60, bound: float = float("inf"),
                           deviation: dict[str, float] | None = None) -> tuple[dict[str, float], int]:
    """The end of the demo workload under max-min fairness, as the controller ran it: a 2-GPU and a
    4-GPU job left on 4 V100 + 4 K80, packable allocation 2/3 of the rounds (2-GPU on V100, 4-GPU
    on K80) and 1/3 the other way round. Each start costs the job ``startup`` seconds of its run
    before its first step (Slurm shows it running). Returns each finished job's end (s) and the
    starts; the controller's rules with ``restart_known`` as the start cost it knows and ``bound`` as
    its deviation bound (rounds). ``deviation`` (filled when given): job -> the largest
    ``|received - share·T|`` over its types and the rounds it was alive, in rounds (T: the rounds'
    seconds so far)."""
    thr = {"A": {"v100": 3.0, "k80": 1.5}, "B": {"v100": 3.0, "k80": 1.0}}
    gpus, cap, total = {"A": 2, "B": 4}, {"v100": 4, "k80": 4}, {"A": 45.0, "B": 45.0}
    confs = [([("A", "v100"), ("B", "k80")], 2 / 3), ([("A", "k80"), ("B", "v100")], 1 / 3)]
    share: dict[tuple[str, str], float] = {}
    for conf, w in confs:
        for e in conf:
            share[e] = share.get(e, 0.0) + w
    received: dict[tuple[str, str], float] = {}
    done = dict.fromkeys(total, 0.0)
    running: dict[str, str] = {}
    age: dict[str, float] = {}
    starting: dict[str, float] = {}
    starts = dict.fromkeys(total, 0)
    finished: dict[str, float] = {}
    for n in range(rounds):
        alive = [j for j in total if j not in finished]
        if not alive:
            break
        owed = {e: s * (n + 1) * length - received.get(e, 0.0) for e, s in share.items() if e[0] in alive}
        remaining = {j: (total[j] - steps_done({t: received.get((j, t), 0.0) for t in cap}, thr[j], starts[j],
                                               restart_known)) / thr[j][t] for j, t in running.items()}
        pins = pinned_jobs(running, age, remaining, dict.fromkeys(running, restart_known))
        fill = sorted((e for e in owed if owed[e] > 0), key=lambda e: -owed[e])
        picked, _ = choose_with_pins([[e for e in c if e[0] in alive] for c, _ in confs], owed, length, running, pins,
                                     gpus, cap, fill, slack=min(restart_known / (2 * length), 0.5), bound=bound)
        chosen = dict(picked)
        running = {j: t for j, t in running.items() if chosen.get(j) == t}
        for j, t in chosen.items():
            if j not in running:
                running[j], age[j], starting[j] = t, 0.0, startup
                starts[j] += 1
            useful = max(length - starting[j], 0.0)
            starting[j] = max(starting[j] - length, 0.0)
            need = (total[j] - done[j]) / thr[j][t]
            ran = length if useful < need else length - useful + need
            done[j] = min(done[j] + useful * thr[j][t], total[j])
            age[j] += length
            received[(j, t)] = received.get((j, t), 0.0) + ran
            if done[j] >= total[j]:
                finished[j] = n * length + ran
                running.pop(j)
        if deviation is not None:  # a job that finished is measured to its end
            for j in alive:
                t_end = finished[j] if j in finished else (n + 1) * length
                for t in cap:
                    dev = abs(received.get((j, t), 0.0) - share.get((j, t), 0.0) * t_end) / length
                    deviation[j] = max(deviation.get(j, 0.0), dev)
    return finished, sum(starts.values())


def test_known_start_costs_end_the_turn_taking() -> None:
    # the cause of the controller's worst JCT: with 12 s starts and 5 s rounds, following the
    # allocation round by round (start cost unknown: nothing pinned) moves both jobs every round
    # or two and neither ever steps
    finished, starts = _two_jobs_taking_turns(0.0)
    assert finished == {} and starts > 40
    # knowing it, each run lasts at least twice its start, and a job near its end keeps running:
    # both finish, with one start each and one more for the 4-GPU job once it is alone
    finished, starts = _two_jobs_taking_turns(12.0)
    assert set(finished) == {"A", "B"} and max(finished.values()) < 60.0 and starts <= 3


def test_a_pin_does_not_leave_a_waiting_job_without_the_gpus_it_freed() -> None:
    # measured (finish_time_fairness, 5 s rounds): allocation 2-GPU job "3" on V100, 4-GPU job "4"
    # on K80; "3" still runs on K80 near its end and is kept there, so "4" no longer fits on K80.
    # Filling only from the allocation's entries left "4" waiting for eight rounds beside four idle
    # V100s; any type it runs on is offered after them
    gpus, cap = {"3": 2, "4": 4}, {"v100": 4, "k80": 4}
    thr = {"3": {"v100": 3.0, "k80": 1.5}, "4": {"v100": 3.0, "k80": 1.0}}
    shared = {("3", "v100"), ("4", "k80")}
    owed = {("3", "v100"): 5.0, ("4", "k80"): 5.0}
    fill = fill_order(shared, owed, thr, ["k80", "v100"])
    assert fill[:2] == [("3", "v100"), ("4", "k80")] and fill[2:] == [("4", "v100"), ("3", "k80")]
    out = keep_pinned([[("3", "v100"), ("4", "k80")]], {"3": "k80"}, gpus, cap, fill)
    assert out == [[("3", "k80"), ("4", "v100")]]
    assert keep_pinned([[("3", "v100"), ("4", "k80")]], {"3": "k80"}, gpus, cap,
                       [e for e in fill if e in shared]) == [[("3", "k80")]]  # the fill before: V100s idle


def test_restart_seconds_option() -> None:
    from policyopt.errors import InputError
    from policyopt.slurm.cli import parse_restart_seconds

    assert parse_restart_seconds("auto") is None and parse_restart_seconds("AUTO") is None
    assert parse_restart_seconds("2.5") == 2.5 and parse_restart_seconds("0") == 0.0
    with pytest.raises(InputError, match="--restart-seconds.*'auto'"):
        parse_restart_seconds("soon")
    with pytest.raises(InputError, match="--restart-seconds: must be >= 0"):
        parse_restart_seconds("-1")


def test_a_pin_is_kept_only_within_the_deviation_bound() -> None:
    # two young runs (a, b) on the two V100s while c waits 1.2 rounds behind (10 s rounds); the most
    # accurate choice runs b and c, leaving every entry 0.2 rounds from its due time
    owed = {("a", "v100"): 2.0, ("b", "v100"): 8.0, ("c", "v100"): 12.0}
    confs = [[("a", "v100"), ("b", "v100")], [("b", "v100"), ("c", "v100")], [("a", "v100"), ("c", "v100")]]
    running, pins = {"a": "v100", "b": "v100"}, {"a": "v100", "b": "v100"}
    gpus, cap = {"a": 1, "b": 1, "c": 1}, {"v100": 2}
    limit = deviation_limit(confs, owed, 10.0, running, bound=0.5)
    assert limit == pytest.approx({("a", "v100"): 0.5, ("b", "v100"): 0.5, ("c", "v100"): 0.5})
    # unbounded (the rule before): both pins kept, c left 1.2 rounds behind
    chosen, kept = choose_with_pins(confs, owed, 10.0, running, pins, gpus, cap)
    assert kept == pins and sorted(chosen) == [("a", "v100"), ("b", "v100")]
    # bounded: b (the most owed) is kept; keeping a as well would leave c 1.2 > 0.5 rounds behind
    chosen, kept = choose_with_pins(confs, owed, 10.0, running, pins, gpus, cap, bound=0.5)
    assert kept == {"b": "v100"} and sorted(chosen) == [("b", "v100"), ("c", "v100")]
    # the slack's trade for fewer moves is bounded too: within a slack of a round, [a, b] moves
    # no job, but leaves c beyond the bound
    assert confs[choose_configuration(confs, owed, 10.0, running, slack=1.0)] == confs[0]
    assert choose_configuration(confs, owed, 10.0, running, slack=1.0, limit=limit, bound=0.5) == 1
    # the limit follows the most accurate choice where it leaves an entry further than the bound
    far = {**owed, ("c", "v100"): 25.0}
    assert deviation_limit(confs, far, 10.0, running, bound=0.5)[("c", "v100")] == pytest.approx(1.5)


@pytest.mark.parametrize("bound", [0.75, 1.0])
def test_the_deviation_bound_holds_where_pins_alone_drift(bound: float) -> None:
    # 5 s rounds, 5 s starts known as such: the pins alone (a run kept for 2r = two rounds, a job
    # near its end kept) leave the two jobs taking turns up to 1.67 rounds from their shares
    deviation: dict[str, float] = {}
    finished, _ = _two_jobs_taking_turns(5.0, startup=5.0, deviation=deviation)
    assert set(finished) == {"A", "B"} and max(deviation.values()) > 1.5
    # bounded, no job leaves its shares by more than the bound, and both still finish
    deviation = {}
    finished, _ = _two_jobs_taking_turns(5.0, startup=5.0, bound=bound, deviation=deviation, rounds=100)
    assert set(finished) == {"A", "B"} and max(deviation.values()) <= bound + 1e-9


def test_deviation_bound_option() -> None:
    from policyopt.errors import InputError
    from policyopt.slurm.cli import parse_deviation_bound

    assert parse_deviation_bound("0.5") == 0.5 and parse_deviation_bound("inf") == float("inf")
    with pytest.raises(InputError, match="--deviation-bound.*'inf'"):
        parse_deviation_bound("half")
    with pytest.raises(InputError, match="--deviation-bound: must be >= 0"):
        parse_deviation_bound("-0.5")
