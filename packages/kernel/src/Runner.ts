/**
 * The loop: fold the log, then until a termination rule holds: ask the model, decode its
 * action, record `ToolStarted`, run the tool, record the outcome. A call is committed before
 * it runs and its outcome before the next model call, so a crash never repeats a side effect.
 * Cancellation is an event (`CancelRequested`) any process may append, and the loop races it;
 * a goal that cannot go on now (the model unreachable, a call awaiting approval, a shutdown)
 * is suspended, recorded and open, rather than ended.
 */
import { Cause, Clock, Effect, Either, Exit, Fiber, Option, Schedule, Schema, type Scope } from "effect"
import * as Action from "./Action.js"
import * as Answer from "./Answer.js"
import * as Behaviour from "./Behaviour.js"
import * as Event from "./Event.js"
import { GoalNotFound, restore, type Result, result } from "./Goal.js"
import { fingerprint, isJson } from "./internal/json.js"
import * as Trace from "./internal/trace.js"
import * as LanguageModel from "./LanguageModel.js"
import * as Options from "./Options.js"
import * as Prompt from "./Prompt.js"
import * as State from "./State.js"
import { first, StateStore, StoreError } from "./StateStore.js"
import * as Termination from "./Termination.js"
import * as Tool from "./Tool.js"
import { ToolRegistry } from "./ToolRegistry.js"
import type * as ToolRegistryModule from "./ToolRegistry.js"

/**
 * Run a goal until it ends or must wait. The loop races the goal's cancellation: a cancel request
 * interrupts whatever model or tool call is in flight (commits are uninterruptible, so the State
 * is always the log's), and the loop then runs once more, from the log, to record the end: a call
 * cut short gets outcome `unknown`, and the termination rules end the run as `cancelled`. An
 * interruption from outside (a shutdown) records the call in flight and `Suspended(shutdown)`.
 */
const toEnd = (run: Run): Effect.Effect<Result, RunError> =>
  Effect.flatMap(run.race(drive(run)), Option.match({ onNone: () => drive(run), onSome: Effect.succeed })).pipe(
    Effect.onInterrupt(() => Effect.ignore(shutdown(run)))
  )

/** The loop, from any point a log can be at, until the goal's one `Terminated` or a `Suspended`. */
const drive = (run: Run): Effect.Effect<Result, RunError> =>
  Effect.gen(function*() {
    if (run.state.pending !== null) yield* recover(run, run.state.pending)
    while (run.state.terminated === null) {
      const state = run.state
      const { awaiting, goalId, seq } = state
      // A call that waits (a sub-goal waiting for a person or its model) suspended the goal with
      // the call started: the next resume runs it again. Cancelled meanwhile, it is cut short.
      if (state.pending !== null) {
        if (state.suspended !== null && state.cancelRequested === null) return result(state)
        yield* recover(run, state.pending)
        continue
      }
      if (awaiting !== null && state.cancelRequested === null) {
        if (awaiting.decision === null && !(yield* run.ask(awaiting))) {
          const stopped = yield* suspend(run, "awaiting_approval", `call ${awaiting.callId} (${awaiting.tool}) waits for a person's approval`)
          if (Option.isSome(stopped)) return stopped.value
          continue
        }
        yield* decided(run)
        continue
      }
      if (state.answer !== null && state.answer.next < state.answer.calls && state.cancelRequested === null) {
        yield* advance(run, [])
        continue
      }
      const stop = Termination.check(state)
      if (Option.isSome(stop)) {
        yield* run.commit([{ _tag: "Terminated", goalId, seq, iteration: state.iteration, at: run.now(), ...stop.value }])
        continue
      }
      const iteration = state.completed + 1
      const next = Prompt.next(state)
      if (next._tag === "Summarise") {
        const stopped = yield* summarise(run, next, iteration)
        if (Option.isSome(stopped)) return stopped.value
        continue
      }
      const answer = yield* Effect.either(run.trace.model(run.model.generate(next.request), iteration, seq))
      if (Either.isLeft(answer)) {
        const stopped = yield* modelFailed(run, answer.left, iteration)
        if (Option.isSome(stopped)) return stopped.value
        continue
      }
      const rules = Behaviour.rules(state.behaviour)
      const response = rules.answerCap ? Action.cap(answer.right, state.options.maxAnswerChars, rules.boundedAnswer) : answer.right
      // The messages sent to the goal that this request showed, once, before this answer.
      const heard = state.inbox.length > 0 ? { heard: state.inbox.length } : {}
      yield* advance(run, [{ _tag: "ModelResponded", goalId, seq, iteration, at: run.now(), response, ...heard }])
    }
    return result(run.state)
  })

/**
 * The model could not answer (after the adapter's retries): `ModelFailed`. A model that may answer
 * later leaves the goal open, waiting (`Suspended` in the same commit); the rules end it otherwise.
 */
const modelFailed = (run: Run, error: LanguageModel.ModelError, iteration: number) =>
  Effect.gen(function*() {
    const { goalId, seq } = run.state
    const { message, permanent, server, status } = error
    const failed: Event.Event = {
      _tag: "ModelFailed", goalId, seq, iteration, at: run.now(), message,
      ...(server === undefined ? {} : { server }),
      ...(status === undefined ? {} : { status }),
      ...(permanent === undefined ? {} : { permanent })
    }
    const waits = State.reduce(run.state, failed).modelFailure === null
    const suspended: Event.Event = { _tag: "Suspended", goalId, seq: seq + 1, iteration, at: run.now(), reason: "model_unavailable", detail: message }
    const committed = yield* run.commit(waits ? [failed, suspended] : [failed])
    return committed === "committed" && waits ? Option.some(result(run.state)) : Option.none()
  })

/**
 * Ask the model for a summary of the turns about to leave the prompt and record it
 * (`TurnsSummarised`) before any prompt shows it. A model that may answer later suspends the goal
 * as for any request; a summary that cannot be had (refused, no text) is recorded as failed, and
 * the prompt counts those turns instead.
 */
const summarise = (run: Run, next: Extract<Prompt.Next, { _tag: "Summarise" }>, iteration: number) =>
  Effect.gen(function*() {
    const { goalId, seq } = run.state
    const answer = yield* Effect.either(run.trace.model(run.model.generate(next.request), iteration, seq))
    if (Either.isLeft(answer) && !(answer.left.permanent ?? LanguageModel.isPermanent(answer.left.status))) {
      return yield* modelFailed(run, answer.left, iteration)
    }
    const base = { _tag: "TurnsSummarised" as const, goalId, seq, iteration, at: run.now(), from: next.from, to: next.to }
    const noUsage = { inputTokens: 0, outputTokens: 0 }
    const outcome = Either.isLeft(answer) ? { failed: answer.left.message } : Prompt.summaryOf(answer.right, run.state.options)
    const usage = Either.isRight(answer) ? answer.right.usage : noUsage
    const event: Event.Event = "failed" in outcome
      ? { ...base, text: "", usage, failed: outcome.failed }
      : { ...base, text: outcome.text, usage, ...(outcome.cut ? { cut: true as const } : {}) }
    yield* run.commit([event])
    return Option.none<Result>()
  })

/**
 * Work through the current answer's calls, in order, after `first` (the answer itself, or the
 * outcome of a call): rejected and denied calls are recorded, and the batch is committed when a
 * call starts (its `ToolStarted` before it runs), waits for approval, or the answer is done.
 */
const advance = (run: Run, first: ReadonlyArray<Event.Event>, decide = true): Effect.Effect<unknown, RunError> => {
  const step = Answer.step(run.state, first, { decide, now: run.now, prepare: run.registry.prepare })
  return Effect.flatMap(run.commit(step.batch, step.after), (committed) =>
    committed === "committed" && step.call !== undefined ? execute(run, step.call, run.state.seq - 1) : Effect.void)
}

/** A person decided on the awaited call: run it exactly as requested, or record the denial. */
const decided = (run: Run) =>
  Effect.suspend(() => {
    const { awaiting, goalId, iteration, seq } = run.state
    if (awaiting === null || awaiting.decision === null) return Effect.void
    const { callId, index, input, tool } = awaiting
    const one = Behaviour.rules(run.state.behaviour).multiCall ? { index } : {}
    const base = { goalId, seq, iteration, at: run.now() }
    const { approved, by, reason } = awaiting.decision
    const prepared = run.registry.prepare({ callId, tool, input, goalId })
    if (!approved || Either.isLeft(prepared)) {
      const why = approved ? `${tool} no longer accepts this input: ${Either.isLeft(prepared) ? prepared.left : ""}` : `denied by ${by}: ${reason}`
      return advance(run, [{ _tag: "ActionRejected", ...base, kind: approved ? "invalid_input" : "denied", reason: why, raw: "", index, tool }])
    }
    return Effect.flatMap(run.commit([{ _tag: "ToolStarted", ...base, callId, tool, input, ...one }]), (committed) =>
      committed === "committed" ? execute(run, prepared.right, run.state.seq - 1) : Effect.void)
  })

/**
 * Stop without ending the goal, recorded once: the goal stays open and `resume` continues it.
 * `None` when events others appended meanwhile (a decision, a cancel) mean the loop goes on.
 */
const suspend = (run: Run, reason: Event.SuspendReason, detail: string, child?: string) =>
  Effect.gen(function*() {
    const { goalId, iteration, seq, suspended } = run.state
    if (suspended?.reason === reason && suspended.child === child) return Option.some(result(run.state))
    const waitsOn = child === undefined ? {} : { child }
    const committed = yield* run.commit([{ _tag: "Suspended", goalId, seq, iteration, at: run.now(), reason, detail, ...waitsOn }])
    return committed === "committed" ? Option.some(result(run.state)) : Option.none()
  })

/** Whether the goal's `tool` is idempotent, as it was offered. */
const isIdempotent = (state: State.State, tool: string): boolean => state.tools.some((spec) => spec.name === tool && spec.idempotent)

/**
 * Interrupted from outside: record the call cut short and `Suspended(shutdown)`. Behaviour 4 leaves
 * an idempotent call started instead: the resume runs it again (a sub-goal goes on where it was).
 */
const shutdown = (run: Run) =>
  Effect.gen(function*() {
    const pending = run.state.pending
    const kept = pending !== null && Behaviour.rules(run.state.behaviour).subGoals && isIdempotent(run.state, pending.tool)
    if (pending !== null && !kept) {
      yield* finish(run, Tool.failure("unknown", `rx was shut down while ${pending.tool} was running (call ${pending.callId}); whether it took effect is unknown`))
    }
    if (run.state.terminated === null) yield* suspend(run, "shutdown", "rx was stopped before the goal ended")
  })

/** Run a started call and record its outcome; `seq` is the call's `ToolStarted` (its span's `rx.seq`). */
const execute = (run: Run, prepared: ToolRegistryModule.Prepared, seq: number): Effect.Effect<unknown, RunError> =>
  Effect.flatMap(run.trace.tool(prepared.run, prepared.call, run.state.iteration, seq), (outcome) => finish(run, outcome))

/**
 * After rx stopped during a call (or a call waited): a goal cancelled meanwhile runs nothing more;
 * an idempotent tool runs again; any other is asked whether the call took effect, else the effect
 * is unknown. Behaviour 4 asks an idempotent tool too when the goal was cancelled (the `delegate`
 * tool then cancels its sub-goal and records how it ended).
 */
const recover = (run: Run, pending: State.Pending) => {
  const { callId, input, tool } = pending
  const unknown = (why: string) => Tool.failure("unknown", `rx stopped while ${tool} was running (call ${callId})${why}`)
  const cancelled = run.state.cancelRequested !== null
  const prepared = run.registry.prepare({ callId, tool, input, goalId: run.state.goalId })
  const idempotent = isIdempotent(run.state, tool)
  // Its `ToolStarted` was read with the log: the span is marked with the seq its outcome takes.
  if (Either.isRight(prepared) && idempotent && !cancelled) return execute(run, prepared.right, run.state.seq)
  // The tool may tell that the call took effect, and cleans up what it left; a cancelled goal runs nothing again.
  const asks = !idempotent || (cancelled && Behaviour.rules(run.state.behaviour).subGoals)
  const known = Either.isRight(prepared) && asks ? prepared.right.recover : Effect.succeedNone
  const why = cancelled
    ? " and the goal was cancelled, so it did not run again; whether it took effect is unknown"
    : "; whether it took effect is unknown, so check before repeating it"
  return Effect.flatMap(known, (outcome) => finish(run, Option.getOrElse(outcome, () => unknown(why))))
}

/**
 * Record the pending call's outcome; with no call of the answer left, the iteration ends in the same
 * commit. A call that waits suspends the goal instead, the call left started.
 */
const finish = (run: Run, outcome: Tool.Outcome): Effect.Effect<unknown, RunError> =>
  Effect.suspend(() => {
    const { goalId, iteration, pending, seq } = run.state
    if (pending === null) return Effect.void
    const { callId, tool } = pending
    const rules = Behaviour.rules(run.state.behaviour)
    if (outcome._tag === "Waiting") {
      if (rules.subGoals && isIdempotent(run.state, tool) && run.state.cancelRequested === null) {
        return suspend(run, outcome.reason, outcome.detail, outcome.child)
      }
      const why = run.state.cancelRequested !== null
        ? Tool.failure("unknown", `the goal was cancelled while call ${callId} (${tool}) waited: ${outcome.detail}`)
        : Tool.failure("recoverable", `${tool} could not finish (${outcome.detail}), and only an idempotent tool's call may wait`)
      return finish(run, why)
    }
    const at = run.now()
    const durationMs = Math.max(0, at - pending.startedAt)
    const plain = isJson(outcome) ? outcome : Tool.failure("recoverable", `${tool} returned a result that is not plain JSON, so it cannot be recorded`)
    const observed = plain._tag === "Success" && plain.observed !== undefined && rules.sameResults ? { observed: plain.observed } : {}
    const usage = plain._tag === "Success" && plain.usage !== undefined && rules.subGoals ? { usage: plain.usage } : {}
    const recorded: Event.Event = plain._tag === "Success"
      ? { _tag: "ToolSucceeded", goalId, seq, iteration, at, callId, tool, output: plain.output, ...observed, ...usage, durationMs }
      : plain._tag === "Failure"
      ? { _tag: "ToolFailed", goalId, seq, iteration, at, callId, tool, error: plain.error, durationMs }
      : { _tag: "ToolFailed", goalId, seq, iteration, at, callId, tool, error: { kind: "recoverable", message: `${tool} could not finish: ${plain.detail}` }, durationMs }
    // Calls left in the answer are decided by the loop, after this outcome is safely recorded.
    return advance(run, [recorded], false)
  })

/** How soon the cancel watcher follows the log again after its store failed: quickly at first, then every 5 s. */
const watchAgain = Schedule.exponential("50 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")))

/**
 * A person's answer to an approval request of the goal `goalId` (the run's own, or a sub-goal's
 * when a tool runs one with the same hooks): `None` leaves the goal suspended until someone decides.
 */
export type Approver = (request: State.Awaiting, goalId: string) => Effect.Effect<Option.Option<Decision>>

/** A decision on a requested call. */
export interface Decision {
  readonly approved: boolean
  readonly reason: string
  readonly by: string
}

/** What a transport may hook into a run. */
export interface Hooks {
  /** Each event once it is committed. */
  readonly observe?: Observer | undefined
  /** Asked when a call needs approval (a person at a terminal); without it, the goal suspends. */
  readonly approve?: Approver | undefined
}

/** Another runner holds the goal or appended to it: only one may run it at a time. */
export class GoalBusy extends Schema.TaggedError<GoalBusy>()("@rx/kernel/GoalBusy", { goalId: Schema.String, reason: Schema.String }) {
  override get message() {
    return `goal ${this.goalId} is being run elsewhere (${this.reason}); this runner stopped`
  }
}

/** A goal the kernel will not run (empty, or longer than a prompt shows of it); nothing was recorded. */
export class InvalidGoal extends Schema.TaggedError<InvalidGoal>()("@rx/kernel/InvalidGoal", {
  reason: Schema.Literal("empty", "too_long"),
  message: Schema.String
}) {}

export type RunError = StoreError | GoalBusy | Options.InvalidOptions | InvalidGoal | Behaviour.UnsupportedBehaviour
export type Services = LanguageModel.LanguageModel | ToolRegistry | StateStore

/** Called with each event once it is committed (live output, JSON lines, metrics). */
export type Observer = (event: Event.Event) => Effect.Effect<void>

/** What a goal is started with. Its id is derived from the goal and the clock unless given. */
export interface Submission {
  readonly goal: string
  /** Standing instructions for the model (a project's conventions, a style), shown with the goal. */
  readonly instructions?: string | undefined
  readonly options?: Options.Input
  readonly goalId?: string
  readonly observe?: Observer
  /** The behaviour version to run under; today's unless replaying an older log. */
  readonly behaviour?: number
  /** For a sub-goal: the goal and call that delegate it (recorded in its `GoalSubmitted`). */
  readonly parent?: Event.Parent | undefined
  /** For a goal that continues an ended one (`Continuation.of`). */
  readonly continues?: Event.Continues | undefined
}

/**
 * Record a new goal (`GoalSubmitted`) and return its id; `resume` runs it. A goal that is empty,
 * or longer than a prompt shows of it (`Prompt.maxGoalChars`), is refused with `InvalidGoal`.
 */
export const submit = (input: Submission): Effect.Effect<string, RunError, ToolRegistry | StateStore> =>
  Effect.gen(function*() {
    const options = yield* Options.decode(input.options ?? {})
    const { specs: tools } = yield* ToolRegistry
    const at = yield* Clock.currentTimeMillis
    const goalId = input.goalId ?? deriveGoalId(input.goal, at)
    const behaviour = input.behaviour ?? Behaviour.current
    if (!Behaviour.isSupported(behaviour)) return yield* new Behaviour.UnsupportedBehaviour({ goalId, version: behaviour })
    if (Behaviour.rules(behaviour).goalChecked) yield* checkGoal(input.goal, options)
    const instructions = input.instructions === undefined || input.instructions === "" ? {} : { instructions: input.instructions }
    const parent = input.parent === undefined ? {} : { parent: input.parent }
    const continues = input.continues === undefined ? {} : { continues: input.continues }
    const submitted: Event.Event = { _tag: "GoalSubmitted", goalId, seq: 0, iteration: 0, at, goal: input.goal, options, tools, ...instructions, behaviour, ...parent, ...continues }
    yield* Effect.flatMap(StateStore, (store) => store.append(goalId, 0, [submitted])).pipe(
      Effect.catchTag("@rx/kernel/AppendConflict", () => new GoalBusy({ goalId, reason: "a goal with this id already exists" }))
    )
    if (input.observe !== undefined) yield* input.observe(submitted)
    return goalId
  })

/** Refuse a goal the model could not read whole: empty, or cut in every prompt. */
const checkGoal = (goal: string, options: Options.Options): Effect.Effect<void, InvalidGoal> => {
  if (goal.trim() === "") return new InvalidGoal({ reason: "empty", message: "the goal is empty: say what to achieve" })
  const limit = Prompt.maxGoalChars(options)
  if (goal.length <= limit) return Effect.void
  return new InvalidGoal({
    reason: "too_long",
    message: `the goal is ${goal.length} characters long, more than the ${limit} a prompt shows of it with promptBudget ${options.promptBudget}: shorten it (put the details in a file the agent reads), or raise promptBudget, which raises the limit (a quarter of it)`
  })
}

/** Start a goal and run it to its end: `submit`, then `resume`. */
export const run = (input: Submission & Hooks): Effect.Effect<Result, RunError | GoalNotFound, Services> =>
  Effect.flatMap(submit(input), (goalId) => resume(goalId, input))

/** Continue a goal from its log. A terminated goal returns its result and appends nothing. */
export const resume = (
  goalId: string,
  hooks: Hooks = {}
): Effect.Effect<Result, RunError | GoalNotFound, Services> =>
  Trace.goal(goalId, (trace) => Effect.gen(function*() {
    const store = yield* StateStore
    const summary = yield* store.goal(goalId)
    if (Option.isNone(summary)) return yield* new GoalNotFound({ goalId })
    // An open goal is read under the lease: the last holder may have appended before letting go.
    if (summary.value.status === "open") {
      yield* Effect.catchTag(store.lease(goalId), "@rx/kernel/LeaseHeld", (held) => new GoalBusy({ goalId, reason: held.holder }))
    }
    const state = yield* restore(goalId)
    trace.restored(state.seq, state.iteration)
    if (state.terminated !== null) return result(state)
    if (!Behaviour.isSupported(state.behaviour)) return yield* new Behaviour.UnsupportedBehaviour({ goalId, version: state.behaviour })
    return yield* toEnd(yield* start(state, hooks, trace))
  }).pipe(Effect.scoped), ending)

/** How a run's span reports its result: an error when the goal ended other than `done` or `cancelled`. */
const ending = (result: Result): Trace.Ending => ({
  status: result.status,
  reason: result.reason,
  detail: result.detail,
  iterations: result.iterations,
  failure: result.status === "terminated" && result.reason !== "done" && result.reason !== "cancelled"
    ? `the goal ended with ${result.reason}: ${result.detail}`
    : undefined
})

/** `g` + time (base 36) + a fingerprint of the goal: sortable, stable under replay. */
export const deriveGoalId = (goal: string, at: number): string =>
  `g${Math.floor(at).toString(36)}${fingerprint(goal).slice(0, 6)}`

/** What a commit did: appended the batch, or dropped it because a cancel request came first. */
export type Committed = "committed" | "superseded"

/** A run in progress: its State, always that of the log, and the means to extend the log. */
interface Run {
  readonly state: State.State
  readonly model: LanguageModel.Service
  readonly registry: ToolRegistryModule.Service
  /** Its spans (none without a tracer). */
  readonly trace: Trace.Trace
  /** The time of the event being drafted: read once per event, so replay can feed recorded times back. */
  readonly now: () => number
  /**
   * Append a batch at the log's end. Events others appended first (a cancel, an options change)
   * are folded in and the batch goes after them, except that a batch recording no tool outcome
   * is dropped once a cancel has come: the loop then decides again.
   */
  readonly commit: (batch: ReadonlyArray<Event.Event>, after?: State.State) => Effect.Effect<Committed, RunError>
  /** Run `effect` until it ends, or until the goal is cancelled (`None`: it was interrupted). */
  readonly race: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<Option.Option<A>, E | RunError>
  /** Ask the run's approver about an awaited call and record its decision; false when there is none. */
  readonly ask: (awaiting: State.Awaiting) => Effect.Effect<boolean, RunError>
}

const start = (initial: State.State, { approve, observe }: Hooks, trace: Trace.Trace): Effect.Effect<Run, never, Services | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const model = yield* LanguageModel.LanguageModel
    const registry = yield* ToolRegistry
    const clock = yield* Effect.clock
    const goalId = initial.goalId
    let state = initial

    /** Fold in what others appended; anything but external events means another runner. */
    const sync = Effect.flatMap(Effect.suspend(() => store.load(goalId, state.seq)), (newer) => {
      const foreign = newer.find((event) => !Event.isExternal(event))
      if (foreign !== undefined) return new GoalBusy({ goalId, reason: `another runner appended seq ${foreign.seq}` })
      state = State.fold(state, newer)
      return Effect.as(published(newer), newer.length)
    })

    /** After a commit: the observer, and the trace, see the events. */
    const published = (events: ReadonlyArray<Event.Event>): Effect.Effect<Committed> => {
      trace.committed(events)
      return observe === undefined ? Effect.succeed("committed") : Effect.as(Effect.forEach(events, observe, { discard: true }), "committed")
    }

    /**
     * Append a batch at the log's end. Events are drafted with the seq they should take; only a
     * rebase after a conflict renumbers them. `after`, when given, is the State the batch as
     * drafted leads to from the current one, already folded.
     */
    const attempt = (batch: ReadonlyArray<Event.Event>, after: State.State | undefined): Effect.Effect<Committed, RunError> => {
      const events = batch[0]?.seq === state.seq ? batch : batch.map((event, i) => ({ ...event, seq: state.seq + i }))
      const next = after !== undefined && events === batch ? after : State.fold(state, events)
      return Effect.matchEffect(store.append(goalId, state.seq, events, next), {
        onSuccess: () => {
          state = next
          return published(events)
        },
        onFailure: (error) => (error._tag === "@rx/kernel/StoreError" ? Effect.fail(error) : conflicted(batch))
      })
    }

    /**
     * Others appended first: fold their events in, then append again after them; or drop the
     * batch (`superseded`) when it recorded nothing of the world and must be decided again.
     */
    const conflicted = (batch: ReadonlyArray<Event.Event>): Effect.Effect<Committed, RunError> =>
      Effect.flatMap(sync, (newer) => {
        if (newer === 0) return new StoreError({ message: `goal ${goalId}: append conflict at seq ${state.seq}, but no newer events`, goalId })
        // What records the world (a tool outcome; a model answer, or a person's decision on a call
        // still awaiting one, unless cancelled) is kept; what was decided from State alone is
        // decided again with the new events in view.
        const outcome = batch.some((event) => event._tag === "ToolSucceeded" || event._tag === "ToolFailed")
        const answer = batch.some((event) => event._tag === "ModelResponded" || event._tag === "ModelFailed" || event._tag === "TurnsSummarised")
        const decision = batch.some((event) => event._tag === "ApprovalDecided") && state.awaiting?.decision === null
        if (!outcome && (!(answer || decision) || state.cancelRequested !== null)) return Effect.succeed("superseded" as const)
        return attempt(batch, undefined)
      })

    /**
     * Commits run uninterruptible, made once per run: the batch goes in through `queued`. An
     * uninterruptible region made per commit, holding its batch and State, keeps them from dying
     * young (V8 promotes them to the old generation, which then grows until a full collection).
     * A run commits one batch at a time (its fibers take turns: see `race`); a batch left by an
     * interruption before its region began was never committed, and the next commit replaces it.
     */
    let queued: { readonly batch: ReadonlyArray<Event.Event>; readonly after: State.State | undefined } | undefined
    const committing: Effect.Effect<Committed, RunError> = Effect.uninterruptible(Effect.suspend(() => {
      const next = queued
      queued = undefined
      return next === undefined ? Effect.dieMessage("a commit ran with no batch") : attempt(next.batch, next.after)
    }))
    const commit = (batch: ReadonlyArray<Event.Event>, after?: State.State): Effect.Effect<Committed, RunError> =>
      Effect.suspend(() => {
        queued = { batch, after }
        return committing
      })

    // One watcher for the whole run: a cancel request, from any process, interrupts the call in
    // flight (`race`). A store that fails to follow the log (a lost connection) is followed again,
    // from the same seq, until the run ends; meanwhile a cancel is still seen at the next commit.
    let cancelSeen = false
    let racing: Fiber.RuntimeFiber<unknown, unknown> | undefined
    const from = state.seq
    yield* Effect.suspend(() => first(store, goalId, from, ["CancelRequested"])).pipe(
      Effect.tapError((error) => Effect.logWarning(`goal ${goalId}: following the log for cancel requests failed (${error.message}); following it again`)),
      Effect.retry(watchAgain),
      Effect.zipRight(Effect.suspend(() => {
        cancelSeen = true
        return racing === undefined ? Effect.void : Fiber.interruptFork(racing)
      })),
      Effect.ignore,
      Effect.forkScoped
    )
    // The call runs in a fiber of its own: a cancel request interrupts it, and it is interrupted and
    // awaited however this one ends (interrupted from outside, it would otherwise end only with
    // this fiber, after the scopes around the run closed: a sub-goal's lease released after the log
    // was closed). Awaited rather than raced against the cancel: a race makes two more fibers per
    // run and interrupts one, about a fifth of a short goal's cost.
    const race = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.fork(restore(effect)), (fiber) => {
          racing = fiber
          return Effect.zipRight(cancelSeen ? Fiber.interruptFork(fiber) : Effect.void, restore(Fiber.await(fiber))).pipe(
            Effect.onExit(() => Fiber.interrupt(fiber)),
            Effect.flatMap((exit) =>
              Exit.isSuccess(exit)
                ? Effect.succeed(Option.some(exit.value))
                : cancelSeen && Cause.isInterruptedOnly(exit.cause)
                ? Effect.succeed(Option.none<A>())
                : Effect.failCause(exit.cause)
            )
          )
        })
      ).pipe(Effect.tap((done) => (Option.isNone(done) ? sync : Effect.void)))

    const now = () => clock.unsafeCurrentTimeMillis()
    const ask = (awaiting: State.Awaiting) =>
      approve === undefined ? Effect.succeed(false) : Effect.flatMap(approve(awaiting, goalId), (decision) =>
        Option.isNone(decision) ? Effect.succeed(false) : Effect.as(
          commit([{ _tag: "ApprovalDecided", goalId, seq: state.seq, iteration: state.iteration, at: now(), callId: awaiting.callId, ...decision.value }]),
          true
        ))

    return {
      get state() {
        return state
      },
      model,
      registry,
      trace,
      now,
      commit,
      race,
      ask
    }
  })
