/**
 * The loop: fold the log, then until a termination rule holds: ask the model, decode its
 * action, record `ToolStarted`, invoke the tool, record the outcome. A call is committed
 * before it runs and its outcome before the next model call, so a crash never repeats a
 * side effect. Cancellation is an event (`CancelRequested`) any transport may append.
 */
import { Clock, Effect, Either, Exit, Fiber, Option, Predicate, Schema, Stream } from "effect"
import * as Action from "./Action.js"
import * as Behaviour from "./Behaviour.js"
import * as Event from "./Event.js"
import { fingerprint, truncate } from "./internal/json.js"
import * as LanguageModel from "./LanguageModel.js"
import * as Options from "./Options.js"
import * as Prompt from "./Prompt.js"
import * as State from "./State.js"
import { StateStore, StoreError } from "./StateStore.js"
import * as Termination from "./Termination.js"
import * as Tool from "./Tool.js"
import { ToolRegistry } from "./ToolRegistry.js"

/** How a run ended. */
export interface Result {
  readonly goalId: string
  readonly reason: Event.Reason
  readonly detail: string
  readonly iterations: number
  readonly state: State.State
}

/** No goal with this id is in the store. */
export class GoalNotFound extends Schema.TaggedError<GoalNotFound>()("GoalNotFound", { goalId: Schema.String }) {
  override get message() {
    return `no goal with id ${this.goalId}`
  }
}

/** Another runner holds the goal or appended to it: only one may run it at a time. */
export class GoalBusy extends Schema.TaggedError<GoalBusy>()("GoalBusy", { goalId: Schema.String, reason: Schema.String }) {
  override get message() {
    return `goal ${this.goalId} is being run elsewhere (${this.reason}); this runner stopped`
  }
}

/** Hold the goal's lease for the run; a runner elsewhere makes this one stop at once. */
const lease = (goalId: string) =>
  Effect.flatMap(StateStore, (store) =>
    Effect.catchTag(store.lease(goalId), "LeaseHeld", (held) => Effect.fail(new GoalBusy({ goalId, reason: held.holder }))))

export type RunError = StoreError | GoalBusy | Options.InvalidOptions | Behaviour.UnsupportedBehaviour
export type Services = LanguageModel.LanguageModel | ToolRegistry | StateStore

/** Called with each event once it is committed (live output, JSON lines, metrics). */
export type Observer = (event: Event.Event) => Effect.Effect<void>

/** Start a goal. Its id is derived from the goal and the clock unless given. */
export const run = (input: {
  readonly goal: string
  readonly options?: Options.Input
  readonly goalId?: string
  readonly observe?: Observer
  /** The behaviour version to run under; today's unless replaying an older log. */
  readonly behaviour?: number
}): Effect.Effect<Result, RunError, Services> =>
  Effect.gen(function*() {
    const options = yield* Options.decode(input.options ?? {})
    const behaviour = input.behaviour ?? Behaviour.current
    const registry = yield* ToolRegistry
    const at = yield* Clock.currentTimeMillis
    const goalId = input.goalId ?? deriveGoalId(input.goal, at)
    if (!Behaviour.isSupported(behaviour)) return yield* new Behaviour.UnsupportedBehaviour({ goalId, version: behaviour })
    yield* lease(goalId)
    const session = yield* makeSession(State.empty(goalId), input.observe)
    const submitted: Event.Event = { _tag: "GoalSubmitted", goalId, seq: 0, iteration: 0, at, goal: input.goal, options, tools: registry.specs, behaviour }
    yield* session.commit([submitted], "start")
    return yield* supervise(session)
  }).pipe(Effect.scoped)

/** Continue a goal from its log. A terminated goal returns its result and appends nothing. */
export const resume = (
  goalId: string,
  hooks: { readonly observe?: Observer } = {}
): Effect.Effect<Result, RunError | GoalNotFound, Services> =>
  Effect.gen(function*() {
    const summary = yield* Effect.flatMap(StateStore, (store) => store.goal(goalId))
    if (Option.isNone(summary)) return yield* new GoalNotFound({ goalId })
    // An open goal is read under the lease: the last holder may have appended before letting go.
    if (summary.value.status === "open") yield* lease(goalId)
    const state = yield* restore(goalId)
    if (state.terminated !== null) return result(state)
    if (!Behaviour.isSupported(state.behaviour)) return yield* new Behaviour.UnsupportedBehaviour({ goalId, version: state.behaviour })
    return yield* supervise(yield* makeSession(state, hooks.observe))
  }).pipe(Effect.scoped)

/** A goal's State: its latest snapshot, if any, with the events after it folded in. */
export const restore = (goalId: string): Effect.Effect<State.State, StoreError, StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const snapshot = yield* store.snapshot(goalId)
    const base = Option.match(snapshot, { onNone: () => State.empty(goalId), onSome: (s) => s.state })
    return State.fold(base, yield* store.load(goalId, base.seq))
  })

/** Ask a goal to stop, from any process: appends `CancelRequested`, which its runner obeys. */
export const cancel = (
  goalId: string,
  reason = "cancelled on request"
): Effect.Effect<"requested" | "already_terminated", StoreError | GoalNotFound, StateStore> =>
  appendExternal(goalId, "a cancel request", ({ goalId, seq, iteration, at }) =>
    Effect.succeed({ _tag: "CancelRequested", goalId, seq, iteration, at, reason }))

/**
 * Change an open goal's options from here on, from any process: appends `OptionsChanged` with
 * `change(current)`, which its runner (this or a later one) follows. Nothing is appended when
 * nothing changes.
 */
export const changeOptions = (
  goalId: string,
  change: (current: Options.Options) => Options.Input
): Effect.Effect<"changed" | "unchanged" | "already_terminated", StoreError | GoalNotFound | Options.InvalidOptions, StateStore> =>
  Effect.gen(function*() {
    let unchanged = false
    const outcome = yield* appendExternal(goalId, "an options change", ({ goalId, seq, iteration, at }) =>
      Effect.gen(function*() {
        const current = (yield* restore(goalId)).options
        const options = yield* Options.decode(change(current))
        unchanged = Schema.equivalence(Options.Options)(current, options)
        return unchanged ? undefined : { _tag: "OptionsChanged", goalId, seq, iteration, at, options }
      }))
    return outcome === "requested" ? (unchanged ? "unchanged" : "changed") : outcome
  })

/**
 * Append one event drafted at the log's end, from outside the runner; a conflict with a
 * concurrent append is retried at the new end. `draft` may decline (`undefined`).
 */
const appendExternal = <E>(
  goalId: string,
  what: string,
  draft: (at: { goalId: string; seq: number; iteration: number; at: number }) => Effect.Effect<Event.Event | undefined, E, StateStore>
): Effect.Effect<"requested" | "already_terminated", StoreError | GoalNotFound | E, StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const summary = yield* store.goal(goalId)
    if (Option.isNone(summary)) return yield* new GoalNotFound({ goalId })
    if (summary.value.status === "terminated") return "already_terminated" as const
    const { lastIteration: iteration, nextSeq: seq } = summary.value
    const event = yield* draft({ goalId, seq, iteration, at: yield* Clock.currentTimeMillis })
    if (event !== undefined) yield* store.append(goalId, seq, [event])
    return "requested" as const
  }).pipe(
    Effect.retry({ times: 50, while: (error) => Predicate.isTagged(error, "AppendConflict") }),
    Effect.catchTag("AppendConflict", () =>
      new StoreError({ message: `could not append ${what} to goal ${goalId}: the log kept moving`, goalId }))
  )

/** `g` + time (base 36) + a fingerprint of the goal: sortable, stable under replay. */
export const deriveGoalId = (goal: string, at: number): string =>
  `g${Math.floor(at).toString(36)}${fingerprint(goal).slice(0, 6)}`

const result = (state: State.State): Result => ({
  goalId: state.goalId,
  reason: state.terminated?.reason ?? "fatal_error",
  detail: state.terminated?.detail ?? "the run ended without a Terminated event",
  iterations: state.completed,
  state
})

/**
 * What a batch does: `start` opens something new (an iteration, the goal, the end);
 * `outcome` records a side effect that already happened and must be kept.
 */
type BatchKind = "start" | "outcome"

type Session = Effect.Effect.Success<ReturnType<typeof makeSession>>


/** The run's mutable cursor over its log: the State, and how to commit events to it. */
const makeSession = (initial: State.State, observe: Observer | undefined) =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const model = yield* LanguageModel.LanguageModel
    const registry = yield* ToolRegistry
    // Each drafted event reads the clock once, synchronously: replay feeds the recorded times back in order.
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    let state = initial
    const goalId = initial.goalId

    const publish = (events: ReadonlyArray<Event.Event>) =>
      observe === undefined ? Effect.void : Effect.forEach(events, observe, { discard: true })

    /** Fold in what others appended (cancel requests); anything else means another runner. */
    const sync = Effect.flatMap(Effect.suspend(() => store.load(goalId, state.seq)), (newer) => {
      if (newer.length === 0) return Effect.succeed(0)
      const foreign = newer.find((event) => !Event.isExternal(event))
      if (foreign !== undefined) return Effect.fail(new GoalBusy({ goalId, reason: `another runner appended seq ${foreign.seq}` }))
      state = State.fold(state, newer)
      return Effect.as(publish(newer), newer.length)
    })

    /**
     * Append a batch at the end of the log. On a conflict with external events, an outcome
     * is appended after them; anything else is dropped (returns false), so the loop
     * re-decides with the cancel request in view.
     */
    const commit = (batch: ReadonlyArray<Event.Event>, kind: BatchKind) =>
      Effect.uninterruptible(Effect.gen(function*() {
        while (true) {
          // Events are drafted with the seq they should take; only a rebase after a conflict renumbers them.
          const events = batch[0]?.seq === state.seq ? batch : batch.map((event, i) => ({ ...event, seq: state.seq + i }))
          const appended = yield* Effect.either(store.append(goalId, state.seq, events))
          if (Either.isRight(appended)) {
            state = State.fold(state, events)
            yield* publish(events)
            return true
          }
          if (appended.left._tag === "StoreError") return yield* appended.left
          if (state.seq === 0) return yield* new GoalBusy({ goalId, reason: "a goal with this id already exists" })
          const added = yield* sync
          if (added === 0) {
            return yield* new StoreError({ message: `goal ${goalId}: append conflict at seq ${state.seq}, but no newer events`, goalId })
          }
          if (kind === "start") return false
        }
      }))

    // One watcher for the whole run: when anyone appends a cancel request, it interrupts the
    // call in flight. Between steps, cancel requests are also seen by `sync`.
    let cancelSeen = false
    let current: Fiber.RuntimeFiber<Result, RunError> | undefined
    yield* store.changes(goalId, state.seq, ["CancelRequested"]).pipe(
      Stream.runHead,
      Effect.flatMap((found) =>
        Effect.suspend(() => {
          if (Option.isNone(found)) return Effect.void
          cancelSeen = true
          return current === undefined ? Effect.void : Fiber.interrupt(current)
        })
      ),
      Effect.ignore,
      Effect.forkScoped
    )

    return {
      get state() {
        return state
      },
      get cancelSeen() {
        return cancelSeen
      },
      setCurrent: (fiber: Fiber.RuntimeFiber<Result, RunError> | undefined) => {
        current = fiber
      },
      model,
      registry,
      sync,
      commit,
      now
    }
  })

/**
 * Run the loop in a fiber the cancel watcher may interrupt. Commits are uninterruptible, so
 * the State is always that of the log; a call cut short is recorded with an unknown outcome,
 * and the loop goes on to record the cancellation.
 */
const supervise = (session: Session): Effect.Effect<Result, RunError> =>
  Effect.gen(function*() {
    let handled = false
    while (true) {
      const fiber = yield* Effect.fork(drive(session))
      session.setCurrent(fiber)
      // A cancel request seen before the fiber was registered: interrupt it now (once).
      if (session.cancelSeen && !handled) yield* Fiber.interruptFork(fiber)
      const exit = yield* Fiber.await(fiber)
      session.setCurrent(undefined)
      if (!(Exit.isInterrupted(exit) && session.cancelSeen)) return yield* exit
      handled = true
      const call = session.state.pending
      if (call !== null) {
        yield* finish(session, call, Tool.failure("unknown", `cancelled while ${call.tool} was running; its effect is unknown`))
      }
    }
  })

/** The loop, from any point a log can be at. */
const drive = (session: Session): Effect.Effect<Result, RunError> =>
  Effect.gen(function*() {
    // A call started with no outcome: rx stopped during it.
    const pending = session.state.pending
    if (pending !== null) yield* recover(session, pending)
    while (true) {
      yield* session.sync
      const state = session.state
      if (state.terminated !== null) return result(state)
      const { goalId, seq } = state
      const stop = Termination.check(state)
      if (Option.isSome(stop)) {
        const terminated: Event.Event = { _tag: "Terminated", goalId, seq, iteration: state.iteration, at: session.now(), ...stop.value }
        if (yield* session.commit([terminated], "start")) return result(session.state)
        continue
      }
      const answer = yield* Effect.either(session.model.generate(Prompt.build(state)))
      const iteration = state.completed + 1
      if (Either.isLeft(answer)) {
        const { message, server, status } = answer.left
        const failed: Event.Event = {
          _tag: "ModelFailed",
          goalId,
          seq,
          iteration,
          at: session.now(),
          message,
          ...(server === undefined ? {} : { server }),
          ...(status === undefined ? {} : { status })
        }
        yield* session.commit([failed], "start")
        continue
      }
      const rules = Behaviour.rules(state.behaviour)
      const response = rules.answerCap ? capAnswer(answer.right, state.options.maxAnswerChars) : answer.right
      const callId = `${goalId}:${iteration}`
      const decision = Action.decide(response, state.tools, (tool, input) => session.registry.decode({ callId, tool, input }), rules)
      const responded: Event.Event = { _tag: "ModelResponded", goalId, seq, iteration, at: session.now(), response }
      switch (decision._tag) {
        case "Reject": {
          const { kind, raw, reason } = decision
          const rejected: Event.Event = { _tag: "ActionRejected", goalId, seq: seq + 1, iteration, at: session.now(), kind, reason, raw }
          yield* session.commit([responded, rejected, completed(session, state, [responded, rejected])], "start")
          break
        }
        case "Done": {
          const done = completed(session, state, [responded])
          const terminated: Event.Event = {
            _tag: "Terminated",
            goalId,
            seq: seq + 2,
            iteration,
            at: session.now(),
            reason: "done",
            detail: decision.summary
          }
          if (yield* session.commit([responded, done, terminated], "start")) return result(session.state)
          break
        }
        case "Call": {
          const { input, tool } = decision
          const started: Event.Event = { _tag: "ToolStarted", goalId, seq: seq + 1, iteration, at: session.now(), callId, tool, input }
          const answered = rules.inputOnce ? { ...responded, response: elideArguments(response) } : responded
          if (!(yield* session.commit([answered, started], "start"))) break
          const call = session.state.pending
          if (call !== null) yield* execute(session, call)
        }
      }
    }
  })

/** Invoke a started call and record its outcome. */
const execute = (session: Session, call: State.Pending) =>
  Effect.flatMap(
    session.registry.invoke({ callId: call.callId, tool: call.tool, input: call.input }),
    (outcome) => finish(session, call, outcome)
  )

/**
 * After a crash inside a call: a goal cancelled meanwhile runs nothing more; an idempotent
 * tool runs again; any other is asked whether the call took effect, and if it cannot tell,
 * the effect is recorded as unknown.
 */
const recover = (session: Session, call: State.Pending) => {
  const { callId, tool } = call
  if (session.state.cancelRequested !== null) {
    return finish(session, call, Tool.failure("unknown", `rx stopped while ${tool} was running (call ${callId}) and the goal was cancelled before it ran again; whether it took effect is unknown`))
  }
  const spec = session.registry.specs.find((s) => s.name === tool)
  if (spec?.idempotent === true) return execute(session, call)
  return Effect.flatMap(session.registry.recover({ callId, tool, input: call.input }), (known) =>
    finish(
      session,
      call,
      Option.getOrElse(known, () =>
        Tool.failure("unknown", `rx stopped while ${tool} was running (call ${callId}); whether it took effect is unknown, so check before repeating it`))
    ))
}

/** Arguments longer than this are recorded once, as the `ToolStarted` input. */
const inlineArguments = 1_024

/** The answer as the log keeps it beside its `ToolStarted`: the started call's long arguments left out. */
const elideArguments = (response: LanguageModel.Response): LanguageModel.Response => {
  const [call, ...rest] = response.toolCalls
  if (call === undefined || call.arguments.length <= inlineArguments) return response
  return { ...response, toolCalls: [{ ...call, arguments: "", argumentsInToolStarted: true }, ...rest] }
}

/** Characters of each text an oversized answer keeps in the log. */
const oversizeKept = 2_000

/** An answer longer than `max` characters, cut to what the log keeps and marked, so it is rejected. */
const capAnswer = (response: LanguageModel.Response, max: number): LanguageModel.Response => {
  let size = response.text.length
  for (const call of response.toolCalls) size += call.name.length + call.arguments.length
  if (size <= max) return response
  return {
    ...response,
    text: truncate(response.text, oversizeKept),
    toolCalls: response.toolCalls.map((call) => ({ ...call, arguments: truncate(call.arguments, oversizeKept) })),
    oversize: size
  }
}

/** Record a call's outcome and the end of its iteration, in one commit. */
const finish = (session: Session, call: State.Pending, outcome: Tool.Outcome) =>
  Effect.suspend(() => {
    const state = session.state
    const { goalId, iteration, seq } = state
    const at = session.now()
    const durationMs = Math.max(0, at - call.startedAt)
    const { callId, tool } = call
    const recorded: Event.Event = outcome._tag === "Success"
      ? { _tag: "ToolSucceeded", goalId, seq, iteration, at, callId, tool, output: outcome.output, durationMs }
      : { _tag: "ToolFailed", goalId, seq, iteration, at, callId, tool, error: outcome.error, durationMs }
    return session.commit([recorded, completed(session, state, [recorded])], "outcome")
  })

/** `IterationCompleted` after `events` (which follow `state`), summarising the State they lead to. */
const completed = (session: Session, state: State.State, events: ReadonlyArray<Event.Event>): Event.Event => {
  const after = State.fold(state, events)
  return {
    _tag: "IterationCompleted",
    goalId: state.goalId,
    seq: after.seq,
    iteration: after.iteration,
    at: session.now(),
    summary: State.summary({ ...after, completed: after.completed + 1 })
  }
}
