/**
 * The contract every `StateStore` must meet, as plain Effects so any test framework can run
 * them: `for (const c of StoreConformance.cases) it.live(c.name, () => c.run.pipe(provide))`.
 * Run them on the live clock (`it.live`, not `it.effect`): the `changes` case waits on real
 * time, which a `TestClock` never moves, so under `it.effect` it hangs until the test times out.
 * Each case uses its own goal ids, so all may share one store.
 */
import { Chunk, Effect, Either, Exit, Fiber, Option, Schema, Scope, Stream } from "effect"
import { Event, type GoalSummary, Options, State, StateStore as Store } from "../src/index.js"

const { first, follow, StateStore } = Store
type StateStore = Store.StateStore

/** A store broke the contract. */
export class ConformanceFailure extends Schema.TaggedError<ConformanceFailure>()("@rx/kernel/ConformanceFailure", {
  message: Schema.String
}) {}

export interface Case {
  readonly name: string
  readonly run: Effect.Effect<void, unknown, StateStore>
}

const check = (ok: boolean, message: string) => (ok ? Effect.void : Effect.fail(new ConformanceFailure({ message })))

const same = (actual: unknown, expected: unknown, what: string) =>
  check(
    JSON.stringify(actual) === JSON.stringify(expected),
    `${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`
  )

let counter = 0
/** A goal id unique within this process (stores under test start empty). */
const freshGoal = (name: string) => `conformance-${name}-${counter++}`

/** A small valid log for `goalId`: submitted, one successful call, done. */
export const sampleLog = (goalId: string, at = 1_000): ReadonlyArray<Event.Event> => {
  const base = { goalId, at }
  return [
    { ...base, _tag: "GoalSubmitted", seq: 0, iteration: 0, goal: "say hi", options: Options.defaults, tools: [], behaviour: 2 },
    {
      ...base,
      _tag: "ModelResponded",
      seq: 1,
      iteration: 1,
      response: { text: "", toolCalls: [{ id: "c", name: "echo", arguments: "{\"text\":\"hi\"}" }], finishReason: "tool_calls", usage: { inputTokens: 3, outputTokens: 4 } }
    },
    { ...base, _tag: "ToolStarted", seq: 2, iteration: 1, callId: `${goalId}:1`, tool: "echo", input: { text: "hi" } },
    { ...base, _tag: "ToolSucceeded", seq: 3, iteration: 1, callId: `${goalId}:1`, tool: "echo", output: { text: "hi", n: [1, 2] }, durationMs: 2 },
    {
      ...base,
      _tag: "IterationCompleted",
      seq: 4,
      iteration: 1,
      summary: { toolCalls: 1, consecutiveFailures: 0, consecutiveMalformed: 0, idleIterations: 0, repeats: 1, last: "ok", fingerprint: "0badf00d" }
    },
    { ...base, _tag: "Terminated", seq: 5, iteration: 1, reason: "done", detail: "said hi" }
  ]
}

/**
 * An open goal that waits twice: for the model (then the options change, which keeps it waiting),
 * and for a person's decision on a call (then decided, started, and done).
 */
const waitingLog = (goalId: string): ReadonlyArray<Event.Event> => {
  const [submitted, responded] = sampleLog(goalId)
  const base = { goalId, at: 1_000 }
  const callId = `${goalId}:1`
  const input = { command: "rm -r build" }
  return [
    submitted as Event.Event,
    { ...base, _tag: "ModelFailed", seq: 1, iteration: 1, message: "connection refused", status: 503 },
    { ...base, _tag: "Suspended", seq: 2, iteration: 1, reason: "model_unavailable", detail: "connection refused" },
    { ...base, _tag: "OptionsChanged", seq: 3, iteration: 1, options: { ...Options.defaults, maxIterations: 7 } },
    { ...(responded as Event.Event), seq: 4 },
    { ...base, _tag: "ApprovalRequested", seq: 5, iteration: 1, callId, tool: "shell", input, index: 0 },
    { ...base, _tag: "Suspended", seq: 6, iteration: 1, reason: "awaiting_approval", detail: "call 1 waits" },
    { ...base, _tag: "ApprovalDecided", seq: 7, iteration: 1, callId, approved: true, reason: "approved", by: "ann" },
    { ...base, _tag: "ToolStarted", seq: 8, iteration: 1, callId, tool: "shell", input, index: 0 },
    { ...base, _tag: "ToolSucceeded", seq: 9, iteration: 1, callId, tool: "shell", output: {}, durationMs: 1 },
    { ...base, _tag: "Terminated", seq: 10, iteration: 1, reason: "done", detail: "cleaned" }
  ]
}

const encodeAll = (events: ReadonlyArray<Event.Event>) => events.map((e) => Schema.encodeSync(Event.Event)(e))

export const cases: ReadonlyArray<Case> = [
  {
    name: "a goal's lease is held by one scope at a time and released with it; runner says whether one holds it",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("lease")
      const first = yield* Scope.make()
      yield* check(Option.isNone(yield* store.runner(goalId)), "runner must be none for a goal no one has leased")
      yield* Scope.extend(store.lease(goalId), first)
      yield* check(Option.isSome(yield* store.runner(goalId)), "runner must name the holder while the lease is held")
      const second = yield* Effect.either(Effect.scoped(store.lease(goalId)))
      yield* check(Either.isLeft(second) && second.left._tag === "@rx/kernel/LeaseHeld", "a second lease on a held goal must fail with LeaseHeld")
      yield* Effect.scoped(store.lease(freshGoal("other-lease")))
      yield* Scope.close(first, Exit.void)
      yield* check(Option.isNone(yield* store.runner(goalId)), "runner must be none once the lease is released")
      yield* Effect.scoped(store.lease(goalId))
      yield* Effect.scoped(store.lease(goalId))
    })
  },
  {
    name: "append then load returns the same events, in order",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("roundtrip")
      const log = sampleLog(goalId)
      yield* store.append(goalId, 0, log.slice(0, 3))
      yield* store.append(goalId, 3, log.slice(3))
      yield* same(encodeAll(yield* store.load(goalId)), encodeAll(log), "load")
      yield* same(encodeAll(yield* store.load(goalId, 4)), encodeAll(log.slice(4)), "load from seq 4")
      yield* same(yield* store.load(freshGoal("unknown")), [], "load of an unknown goal")
    })
  },
  {
    name: "one batch of 10,000 events is appended whole, reads back in order, and the log goes on after it",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("big-batch")
      const log = sampleLog(goalId)
      // An answer of thousands of calls recorded at once: far past any store's bind-parameter limit.
      const batch: Array<Event.Event> = [log[0] as Event.Event, log[1] as Event.Event]
      for (let seq = batch.length; seq < 10_000; seq++) {
        batch.push({ goalId, at: 1_000, _tag: "ActionRejected", seq, iteration: 1, kind: "too_many_calls", reason: "past the cap", index: seq, tool: "echo", raw: `{"text":"${seq}"}` })
      }
      yield* store.append(goalId, 0, batch)
      const loaded = yield* store.load(goalId)
      yield* same(loaded.length, batch.length, "events loaded after a batch of 10,000")
      yield* same(encodeAll(loaded), encodeAll(batch), "the batch of 10,000 as loaded")
      const after = log.slice(4).map((e, i) => ({ ...e, seq: batch.length + i }))
      yield* store.append(goalId, batch.length, after)
      yield* same(encodeAll(yield* store.load(goalId, batch.length - 1)), encodeAll([...batch.slice(-1), ...after]), "load across the end of the batch")
      const summary = yield* store.goal(goalId)
      yield* same(Option.map(summary, (s) => [s.status, s.nextSeq]), Option.some(["terminated", batch.length + after.length]), "summary after the batch")
    })
  },
  {
    name: "a stale expectedSeq is an AppendConflict and appends nothing",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("conflict")
      const log = sampleLog(goalId)
      yield* store.append(goalId, 0, log.slice(0, 2))
      const stale = yield* Effect.either(store.append(goalId, 1, [{ ...(log[2] as Event.Event), seq: 1 }]))
      yield* check(Either.isLeft(stale) && stale.left._tag === "@rx/kernel/AppendConflict", "a stale append must fail with AppendConflict")
      if (Either.isLeft(stale) && stale.left._tag === "@rx/kernel/AppendConflict") {
        yield* same([stale.left.expectedSeq, stale.left.actualSeq], [1, 2], "conflict seqs")
      }
      const ahead = yield* Effect.either(store.append(goalId, 5, [{ ...(log[2] as Event.Event), seq: 5 }]))
      yield* check(Either.isLeft(ahead) && ahead.left._tag === "@rx/kernel/AppendConflict", "an append past the end must fail with AppendConflict")
      // A second submission under the same id: refused, and the goal's summary is untouched.
      const again = yield* Effect.either(store.append(goalId, 0, [{ ...(log[0] as Event.Event), goal: "another goal" } as Event.Event]))
      yield* check(Either.isLeft(again) && again.left._tag === "@rx/kernel/AppendConflict", "a first append to a goal that has events must fail with AppendConflict")
      if (Either.isLeft(again) && again.left._tag === "@rx/kernel/AppendConflict") {
        yield* same([again.left.expectedSeq, again.left.actualSeq], [0, 2], "conflict seqs of a second first append")
      }
      const summary = Option.getOrUndefined(yield* store.goal(goalId))
      yield* same([summary?.goal, summary?.nextSeq], ["say hi", 2], "the summary after a refused first append")
      yield* same((yield* store.load(goalId)).length, 2, "events after refused appends")
    })
  },
  {
    name: "a batch whose seqs or goal do not continue the log is refused whole",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("batch")
      const log = sampleLog(goalId)
      yield* store.append(goalId, 0, log.slice(0, 1))
      const gap = yield* Effect.either(store.append(goalId, 1, [log[1] as Event.Event, log[3] as Event.Event]))
      yield* check(Either.isLeft(gap) && gap.left._tag === "@rx/kernel/StoreError", "a batch with a seq gap must fail with StoreError")
      const other = yield* Effect.either(store.append(goalId, 1, [{ ...(log[1] as Event.Event), goalId: "someone-else" }]))
      yield* check(Either.isLeft(other), "a batch holding another goal's event must fail")
      const headless = freshGoal("headless")
      const noGoal = yield* Effect.either(store.append(headless, 0, [{ ...(log[1] as Event.Event), goalId: headless, seq: 0 }]))
      yield* check(Either.isLeft(noGoal), "a log must start with GoalSubmitted")
      yield* same((yield* store.load(goalId)).length, 1, "events after refused batches")
    })
  },
  {
    name: "goal and goals summarise each goal, newest first, filtered and limited",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const older = freshGoal("older")
      const newer = freshGoal("newer")
      yield* store.append(older, 0, sampleLog(older, 5_000))
      yield* store.append(newer, 0, sampleLog(newer, 6_000).slice(0, 3))
      const summary = yield* store.goal(older)
      yield* check(Option.isSome(summary), "goal() must find a stored goal")
      if (Option.isSome(summary)) {
        const s = summary.value
        yield* same([s.status, s.reason, s.iterations, s.nextSeq, s.goal], ["terminated", "done", 1, 6, "say hi"], "summary of a finished goal")
      }
      yield* same(Option.isNone(yield* store.goal(freshGoal("missing"))), true, "goal() of an unknown goal is None")
      const open = (yield* store.goals({ status: "open" })).map((g) => g.goalId)
      yield* check(open.includes(newer) && !open.includes(older), "status filter")
      const all = (yield* store.goals()).map((g) => g.goalId)
      yield* check(all.indexOf(newer) !== -1 && all.indexOf(newer) < all.indexOf(older), "goals are newest first")
      yield* same((yield* store.goals({ limit: 1 })).length, 1, "limit")
    })
  },
  {
    name: "a sub-goal's summary names its parent; goals({ parent }) lists that goal's sub-goals only, newest first, filtered",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const parent = freshGoal("parent")
      const other = freshGoal("other")
      const [first, second, third] = [freshGoal("child"), freshGoal("child"), freshGoal("child")] as const
      const child = (goalId: string, of: string, at: number, call: number) =>
        sampleLog(goalId, at).map((e) => (e._tag === "GoalSubmitted" ? { ...e, parent: { goalId: of, callId: `${of}:${call}`, depth: 1 } } : e))
      // The parent waits on its sub-goal; the suspension says which.
      const [submitted, ...rest] = sampleLog(parent, 7_000)
      yield* store.append(parent, 0, [submitted as Event.Event, {
        _tag: "Suspended", goalId: parent, seq: 1, iteration: 1, at: 7_000, reason: "awaiting_approval", detail: "sub-goal waits", child: second
      }])
      yield* same(rest.length > 0, true, "sample log")
      yield* store.append(first, 0, child(first, parent, 7_001, 1))
      yield* store.append(second, 0, child(second, parent, 7_002, 2).slice(0, 3))
      yield* store.append(third, 0, child(third, other, 7_003, 1))
      yield* same(Option.getOrUndefined(yield* store.goal(first))?.parent, parent, "goal(): a sub-goal's parent")
      yield* same(Option.getOrUndefined(yield* store.goal(parent))?.parent, null, "goal(): a goal submitted on its own has no parent")
      yield* same(Option.getOrUndefined(yield* store.goal(parent))?.suspended, { reason: "awaiting_approval", detail: "sub-goal waits", child: second }, "goal(): the sub-goal a goal waits on")
      yield* same((yield* store.goals({ parent })).map((g) => g.goalId), [second, first], "goals({ parent }): its sub-goals, newest first")
      yield* same((yield* store.goals({ parent, status: "open" })).map((g) => g.goalId), [second], "goals({ parent, status })")
      yield* same((yield* store.goals({ parent, limit: 1 })).map((g) => g.goalId), [second], "goals({ parent, limit })")
      yield* same((yield* store.goals({ parent: freshGoal("none") })).length, 0, "goals({ parent }) of a goal with no sub-goals")
      yield* same((yield* store.goals()).find((g) => g.goalId === third)?.parent, other, "goals(): each summary names its parent")
    })
  },
  {
    name: "a fork's summary names where it was forked from; goals({ forkedFrom }) lists that goal's forks only, newest first, filtered",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const origin = freshGoal("origin")
      const other = freshGoal("other")
      const [first, second, third] = [freshGoal("fork"), freshGoal("fork"), freshGoal("fork")] as const
      const fork = (goalId: string, of: string, at: number, iteration: number) =>
        sampleLog(goalId, at).map((e) => (e._tag === "GoalSubmitted" ? { ...e, forkedFrom: { goalId: of, iteration } } : e))
      yield* store.append(origin, 0, sampleLog(origin, 8_000))
      yield* store.append(first, 0, fork(first, origin, 8_001, 2))
      yield* store.append(second, 0, fork(second, origin, 8_002, 1).slice(0, 3))
      yield* store.append(third, 0, fork(third, other, 8_003, 1))
      yield* same(Option.getOrUndefined(yield* store.goal(first))?.forkedFrom, { goalId: origin, iteration: 2 }, "goal(): a fork's origin")
      yield* same(Option.getOrUndefined(yield* store.goal(origin))?.forkedFrom, null, "goal(): a goal that is no fork")
      yield* same((yield* store.goals({ forkedFrom: origin })).map((g) => g.goalId), [second, first], "goals({ forkedFrom }): its forks, newest first")
      yield* same((yield* store.goals({ forkedFrom: origin, status: "open" })).map((g) => g.goalId), [second], "goals({ forkedFrom, status })")
      yield* same((yield* store.goals({ forkedFrom: origin, limit: 1 })).map((g) => g.goalId), [second], "goals({ forkedFrom, limit })")
      yield* same((yield* store.goals({ forkedFrom: freshGoal("none") })).length, 0, "goals({ forkedFrom }) of a goal with no forks")
      yield* same((yield* store.goals()).find((g) => g.goalId === third)?.forkedFrom, { goalId: other, iteration: 1 }, "goals(): each summary names its origin")
    })
  },
  {
    name: "a goal's summary says why it waits, as its State does: the suspension, and the call awaiting a decision",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("waiting")
      const log = [...waitingLog(goalId)]
      // What goal() and goals() say after each append, against what the State of the log so far says.
      const says = (s: GoalSummary.GoalSummary | undefined) => s === undefined ? undefined : { suspended: s.suspended, approval: s.approval }
      for (let seq = 0; seq < log.length; seq++) {
        yield* store.append(goalId, seq, [log[seq] as Event.Event])
        const state = State.fromEvents(goalId, log.slice(0, seq + 1))
        const awaiting = state.awaiting
        const expected = {
          suspended: state.suspended,
          approval: awaiting === null || awaiting.decision !== null || state.cancelRequested !== null || state.terminated !== null
            ? null
            : { callId: awaiting.callId, tool: awaiting.tool, input: awaiting.input, index: awaiting.index }
        }
        const after = `after ${log[seq]?._tag} (seq ${seq})`
        yield* same(says(Option.getOrUndefined(yield* store.goal(goalId))), expected, `goal(): why the goal waits ${after}`)
        yield* same(says((yield* store.goals()).find((g) => g.goalId === goalId)), expected, `goals(): why the goal waits ${after}`)
      }
      // The same in one batch: the summary is that of the whole batch.
      const batched = freshGoal("waiting-batch")
      const cut = log.findIndex((e) => e._tag === "ApprovalDecided")
      yield* store.append(batched, 0, waitingLog(batched).slice(0, cut))
      const summary = Option.getOrUndefined(yield* store.goal(batched))
      yield* same(
        says(summary),
        { suspended: { reason: "awaiting_approval", detail: "call 1 waits" }, approval: { callId: `${batched}:1`, tool: "shell", input: { command: "rm -r build" }, index: 0 } },
        "a batch ending in an approval request and its suspension"
      )
    })
  },
  {
    name: "a snapshot, if the store keeps them, is a State the runner handed it, never one it folded itself",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("snapshot")
      const log = sampleLog(goalId)
      // A State no fold of these events gives: the goal text marks it as the runner's own.
      const handed = (upTo: number) => ({ ...State.fromEvents(goalId, log.slice(0, upTo)), goal: `handed at ${upTo}` })
      for (let seq = 0; seq < log.length; seq++) yield* store.append(goalId, seq, log.slice(seq, seq + 1), handed(seq + 1))
      const snapshot = yield* store.snapshot(goalId)
      if (Option.isSome(snapshot)) {
        yield* same(snapshot.value.state, handed(snapshot.value.seq), `the snapshot at seq ${snapshot.value.seq}`)
      }
    })
  },
  {
    name: "changes gives stored events, then each appended one, from a seq",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("changes")
      const log = sampleLog(goalId)
      yield* store.append(goalId, 0, log.slice(0, 2))
      const fiber = yield* Effect.fork(Stream.runCollect(Stream.take(store.changes(goalId, 1), 4)))
      yield* Effect.sleep("20 millis")
      yield* store.append(goalId, 2, log.slice(2, 4))
      const noise = freshGoal("noise")
      yield* store.append(noise, 0, sampleLog(noise).slice(0, 1))
      yield* store.append(goalId, 4, log.slice(4, 5))
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds")))
      yield* same(seen.map((e) => e.seq), [1, 2, 3, 4], "seqs seen by changes")
      yield* check(seen.every((e) => e.goalId === goalId), "changes must hold only the goal's events")
    })
  },
  {
    name: "follow gives stored events, then the events appended, from a seq, at least one per pull, only the kinds asked for",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("follow")
      const log = sampleLog(goalId)
      yield* store.append(goalId, 0, log.slice(0, 2))
      const seen: Array<Event.Event> = []
      const pulls = yield* Effect.fork(Effect.scoped(Effect.flatMap(follow(store, goalId, 1), (next) =>
        Effect.repeat(Effect.tap(next, (events) => Effect.sync(() => seen.push(...events))), { until: () => seen.length >= 4 }))))
      yield* Effect.sleep("20 millis")
      yield* store.append(goalId, 2, log.slice(2, 4))
      const noise = freshGoal("noise")
      yield* store.append(noise, 0, sampleLog(noise).slice(0, 1))
      yield* store.append(goalId, 4, log.slice(4, 5))
      yield* Fiber.join(pulls).pipe(Effect.timeout("10 seconds"))
      yield* same(seen.map((e) => e.seq), [1, 2, 3, 4], "seqs seen by follow")
      yield* check(seen.every((e) => e.goalId === goalId), "follow must give only the goal's events")
      // Of some kinds, from a seq past the log's end: it waits for the next of them.
      const tagged = yield* Effect.fork(Effect.scoped(Effect.flatMap(follow(store, goalId, 5, ["Terminated"]), (next) => next)))
      yield* Effect.sleep("20 millis")
      yield* check(tagged.unsafePoll() === null, "follow must wait while no event of the kinds is appended to the goal")
      yield* store.append(goalId, 5, log.slice(5, 6))
      const ended: ReadonlyArray<Event.Event> = Chunk.toReadonlyArray(yield* Fiber.join(tagged).pipe(Effect.timeout("10 seconds")))
      yield* same(ended.map((e) => [e.seq, e._tag]), [[5, "Terminated"]], "the appended event of the kinds")
    })
  },
  {
    name: "first gives the first stored event of the kinds from a seq, or waits for the next one appended",
    run: Effect.gen(function*() {
      const store = yield* StateStore
      const goalId = freshGoal("first")
      const log = sampleLog(goalId)
      yield* store.append(goalId, 0, log.slice(0, 3))
      const stored = yield* first(store, goalId, 1, ["ToolStarted", "ModelResponded"]).pipe(Effect.timeout("10 seconds"))
      yield* same([stored.goalId, stored.seq], [goalId, 1], "the first stored event of the kinds")
      // From a seq past the stored one of that kind: the next one appended, not an older one.
      const fiber = yield* Effect.fork(first(store, goalId, 2, ["ModelResponded", "Terminated"]))
      yield* Effect.sleep("20 millis")
      yield* store.append(goalId, 3, log.slice(3, 4))
      const noise = freshGoal("noise")
      yield* store.append(noise, 0, sampleLog(noise).slice(0, 6))
      yield* Effect.sleep("20 millis")
      yield* check(fiber.unsafePoll() === null, "first must wait while no event of the kinds is appended to the goal")
      yield* store.append(goalId, 4, log.slice(4, 6))
      const appended = yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
      yield* same([appended.goalId, appended.seq, appended._tag], [goalId, 5, "Terminated"], "the first appended event of the kinds")
    })
  }
]
