/**
 * Verify a recorded log by running the same runner again under replay Layers: the model
 * answers with the recorded responses, tools return the recorded outcomes, the clock gives
 * the recorded times, and a verifying store compares each appended event with the log.
 * No live call is made. The first difference is a `NonDeterminism` naming its seq.
 */
import { Clock, Context, Duration, Effect, Either, Layer, Option, Schema, Stream } from "effect"
import * as Behaviour from "./Behaviour.js"
import * as Event from "./Event.js"
import * as GoalSummary from "./GoalSummary.js"
import { canonical } from "./internal/json.js"
import * as LanguageModel from "./LanguageModel.js"
import { ModelError } from "./LanguageModel.js"
import * as Runner from "./Runner.js"
import { AppendConflict, StateStore, StoreError } from "./StateStore.js"
import * as Tool from "./Tool.js"
import { ToolRegistry } from "./ToolRegistry.js"

/** The replay produced `actual` where the log holds `expected` (either may be missing). */
export class NonDeterminism extends Schema.TaggedError<NonDeterminism>()("NonDeterminism", {
  goalId: Schema.String,
  seq: Schema.Number,
  expected: Schema.NullOr(Schema.Unknown),
  actual: Schema.NullOr(Schema.Unknown)
}) {
  override get message() {
    const show = (e: unknown) => (e === null ? "nothing" : canonical(e))
    return `replay of goal ${this.goalId} diverged at seq ${this.seq}: the log has ${show(this.expected)}, the replay produced ${show(this.actual)}`
  }
}

/** The log cannot be replayed at all (empty, or not starting with `GoalSubmitted`). */
export class ReplayError extends Schema.TaggedError<ReplayError>()("ReplayError", { message: Schema.String }) {}

/** Replay `events` (one goal's whole log) and check the runner reproduces them exactly. */
export const verify = (
  events: ReadonlyArray<Event.Event>
): Effect.Effect<Runner.Result, NonDeterminism | ReplayError | Behaviour.UnsupportedBehaviour> =>
  Effect.gen(function*() {
    const first = events[0]
    if (first === undefined || first._tag !== "GoalSubmitted") {
      return yield* new ReplayError({ message: "a log must start with GoalSubmitted" })
    }
    const { goalId } = first
    const encode = (event: Event.Event | undefined) => (event === undefined ? null : Schema.encodeSync(Event.Event)(event))
    let position = 0
    let divergence: NonDeterminism | undefined
    const diverge = (seq: number, actual: Event.Event | undefined) => {
      divergence = new NonDeterminism({ goalId, seq, expected: encode(events[seq]), actual: encode(actual) })
      return new StoreError({ message: divergence.message, goalId, seq })
    }
    /** Deliver external events (cancel requests) recorded at the current position. */
    const deliverExternal = () => {
      while (position < events.length && Event.isExternal(events[position] as Event.Event)) position++
    }

    const store = StateStore.of({
      append: (_goalId, expectedSeq, batch) =>
        Effect.suspend((): Effect.Effect<void, AppendConflict | StoreError> => {
          if (expectedSeq === position && batch[0] !== undefined && !Event.isExternal(batch[0])) deliverExternal()
          if (expectedSeq !== position) return Effect.fail(new AppendConflict({ goalId, expectedSeq, actualSeq: position }))
          for (const [i, event] of batch.entries()) {
            const recorded = events[position + i]
            if (recorded === undefined || canonical(encode(recorded)) !== canonical(encode(event))) {
              return Effect.fail(diverge(position + i, event))
            }
          }
          position += batch.length
          return Effect.void
        }),
      load: (_goalId, fromSeq = 0) =>
        Effect.sync(() => {
          deliverExternal()
          return events.slice(fromSeq, position)
        }),
      goal: () => Effect.sync(() => Option.fromNullable(events.slice(0, position).reduce(GoalSummary.update, undefined))),
      goals: () => Effect.succeed([]),
      changes: () => Stream.never,
      snapshot: () => Effect.succeed(Option.none()),
      lease: () => Effect.void
    })

    const answers = events.flatMap((e, i): ReadonlyArray<Effect.Effect<LanguageModel.Response, ModelError>> =>
      e._tag === "ModelResponded"
        ? [Effect.succeed(withArguments(e.response, events[i + 1]))]
        : e._tag === "ModelFailed"
        ? [Effect.fail(new ModelError({ message: e.message, ...(e.server === undefined ? {} : { server: e.server }), ...(e.status === undefined ? {} : { status: e.status }) }))]
        : []
    )
    let answered = 0
    const model = LanguageModel.LanguageModel.of({
      generate: () =>
        Effect.suspend(() => answers[answered++] ?? Effect.fail(new ModelError({ message: "the log holds no further model answer" })))
    })

    const outcomes = new Map<string, Tool.Outcome>()
    const verdicts = new Map<string, string>()
    for (const event of events) {
      if (event._tag === "ToolSucceeded") outcomes.set(event.callId, { _tag: "Success", output: event.output })
      if (event._tag === "ToolFailed") outcomes.set(event.callId, { _tag: "Failure", error: event.error })
      if (event._tag === "ActionRejected" && event.kind === "invalid_input") {
        verdicts.set(`${goalId}:${event.iteration}`, event.reason.replace(/^invalid input for [^:]+: /, ""))
      }
    }
    const registry = ToolRegistry.of({
      specs: first.tools,
      decode: (call) => {
        const verdict = verdicts.get(call.callId)
        return verdict === undefined ? Either.right(call.input) : Either.left(verdict)
      },
      invoke: (call) =>
        Effect.succeed(outcomes.get(call.callId) ?? Tool.failure("unknown", `the log holds no outcome for call ${call.callId}`)),
      recover: (call) => Effect.succeed(Option.fromNullable(outcomes.get(call.callId)))
    })

    // The runner reads the clock once per event it drafts (synchronously); each read gives the
    // next recorded time. Nothing else reads the clock under replay (no live calls are made).
    const times = events.flatMap((e) => (Event.isExternal(e) ? [] : [e.at]))
    let ticks = 0
    const tick = () => times[ticks++] ?? times[times.length - 1] ?? 0
    const clock: Clock.Clock = {
      [Clock.ClockTypeId]: Clock.ClockTypeId,
      unsafeCurrentTimeMillis: tick,
      unsafeCurrentTimeNanos: () => BigInt(tick()) * 1_000_000n,
      currentTimeMillis: Effect.sync(tick),
      currentTimeNanos: Effect.sync(() => BigInt(tick()) * 1_000_000n),
      sleep: (duration: Duration.Duration) => Effect.sleep(duration)
    }

    const layers = Layer.succeedContext(
      Context.make(StateStore, store).pipe(Context.add(LanguageModel.LanguageModel, model), Context.add(ToolRegistry, registry))
    )
    const outcome = yield* Runner.run({ goal: first.goal, options: first.options, goalId, behaviour: first.behaviour }).pipe(
      Effect.provide(layers),
      Effect.withClock(clock),
      Effect.either
    )
    if (divergence !== undefined) return yield* divergence
    if (Either.isLeft(outcome)) {
      if (outcome.left._tag === "@rx/kernel/UnsupportedBehaviour") return yield* outcome.left
      return yield* new ReplayError({ message: `replay failed: ${outcome.left.message}` })
    }
    if (position < events.length) return yield* new NonDeterminism({ goalId, seq: position, expected: encode(events[position]), actual: null })
    return outcome.right
  })

/** The answer as the model gave it: arguments the log keeps only in `ToolStarted` put back. */
const withArguments = (response: LanguageModel.Response, next: Event.Event | undefined): LanguageModel.Response => {
  const [call, ...rest] = response.toolCalls
  if (call?.argumentsInToolStarted !== true || next?._tag !== "ToolStarted") return response
  return { ...response, toolCalls: [{ id: call.id, name: call.name, arguments: JSON.stringify(next.input) }, ...rest] }
}
