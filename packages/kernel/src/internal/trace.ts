/**
 * The runner's spans. A goal run's span (`rx.goal`, the root of a trace) holds one span per
 * iteration (`rx.iteration`), each holding its model call (`chat`) and its tool calls
 * (`execute_tool <tool>`); every span, and every span made inside them (an HTTP client's, a
 * tool's own), carries `rx.goal_id`, `rx.iteration` and `rx.seq`. Spans are made only when a
 * tracer is provided: Effect's default tracer keeps spans no one reads, so a run under it makes
 * none and pays nothing per iteration.
 */
import { type Clock, Context, DefaultServices, Effect, Exit, FiberRef, Option, Schema, Tracer } from "effect"
import type * as Event from "../Event.js"
import type * as LanguageModel from "../LanguageModel.js"
import type * as Tool from "../Tool.js"

/** The spans of one run. */
export interface Trace {
  /** The log was read: the goal's span notes where this run starts. */
  readonly restored: (seq: number, iteration: number) => void
  /** The model call of `iteration`, its answer to be recorded at `seq`. */
  readonly model: <R>(
    effect: Effect.Effect<LanguageModel.Response, LanguageModel.ModelError, R>,
    iteration: number,
    seq: number
  ) => Effect.Effect<LanguageModel.Response, LanguageModel.ModelError, R>
  /** A tool call of `iteration`; `seq` is its `ToolStarted`'s. */
  readonly tool: <R>(
    effect: Effect.Effect<Tool.Outcome, never, R>,
    call: Tool.Call,
    iteration: number,
    seq: number
  ) => Effect.Effect<Tool.Outcome, never, R>
  /** Events just committed: each becomes a span event; `IterationCompleted` ends its iteration's span. */
  readonly committed: (events: ReadonlyArray<Event.Event>) => void
}

/** How a goal run ended, as its span reports it; `failure`, when set, makes the span an error. */
export interface Ending {
  readonly status: string
  readonly reason: string
  readonly detail: string
  readonly iterations: number
  readonly failure: string | undefined
}

/** No tracer: no spans. */
const untraced: Trace = {
  restored: () => {},
  model: (effect) => effect,
  tool: (effect) => effect,
  committed: () => {}
}

/** The tracer Effect runs with when none is provided. */
const native = Context.get(DefaultServices.liveServices, Tracer.Tracer)

const isTraced = Effect.zipWith(
  Effect.tracer,
  FiberRef.get(FiberRef.currentTracerEnabled),
  (tracer, enabled) => enabled && tracer !== native
)

/** A goal that did not end with `done` or `cancelled`, as its span's error. */
class GoalNotDone extends Schema.TaggedError<GoalNotDone>()("@rx/kernel/GoalNotDone", { message: Schema.String }) {}

/** A tool call whose outcome is a failure, as its span's error. */
class ToolCallFailed extends Schema.TaggedError<ToolCallFailed>()("@rx/kernel/ToolCallFailed", { message: Schema.String }) {}

const capped = (text: string, limit = 1_000) => (text.length > limit ? `${text.slice(0, limit)}...` : text)

/**
 * Run a goal's `body` in its span when a tracer is provided; `body` gets the run's spans. The
 * goal's span is the root of its own trace: a run can outlast what started it (a request, a job
 * queue), whose span is linked instead.
 */
export const goal = <A, E, R>(
  goalId: string,
  body: (trace: Trace) => Effect.Effect<A, E, R>,
  ending: (result: A) => Ending
): Effect.Effect<A, E, R> => Effect.flatMap(isTraced, (traced) => (traced ? spanned(goalId, body, ending) : body(untraced)))

const spanned = <A, E, R>(goalId: string, body: (trace: Trace) => Effect.Effect<A, E, R>, ending: (result: A) => Ending) =>
  Effect.flatMap(Effect.option(Effect.currentParentSpan), (caller) =>
    Effect.useSpan("rx.goal", { root: true, links: linked(caller), captureStackTrace: false }, (span) =>
      Effect.flatMap(Effect.clock, (clock) => {
        const spans = make(span, clock)
        return body(spans.trace).pipe(
          Effect.withParentSpan(span),
          Effect.onExit((exit) => Effect.sync(() => spans.close(exit))),
          Effect.tap((result) => Effect.sync(() => report(span, clock, ending(result))))
        )
      }))).pipe(Effect.annotateSpans("rx.goal_id", goalId))

/** The span current where a run starts (a request, a job), linked from the goal's: a run may outlast it. */
const linked = (caller: Option.Option<Tracer.AnySpan>): ReadonlyArray<Tracer.SpanLink> =>
  Option.match(caller, { onNone: () => [], onSome: (span) => [{ _tag: "SpanLink", span, attributes: {} }] })

const report = (span: Tracer.Span, clock: Clock.Clock, end: Ending) => {
  span.attribute("rx.status", end.status)
  span.attribute("rx.reason", end.reason)
  span.attribute("rx.detail", capped(end.detail))
  span.attribute("rx.iterations", end.iterations)
  if (end.failure !== undefined) span.end(clock.unsafeCurrentTimeNanos(), Exit.fail(new GoalNotDone({ message: end.failure })))
}

const make = (goal: Tracer.Span, clock: Clock.Clock) => {
  let open: { readonly span: Tracer.Span; readonly iteration: number } | undefined
  const now = () => clock.unsafeCurrentTimeNanos()
  const end = (exit: Exit.Exit<unknown, unknown>) => {
    if (open !== undefined) open.span.end(now(), exit)
    open = undefined
  }

  /** The span of `iteration`: the open one, or a new one (a run resumed in the middle of an iteration opens one too). */
  const iteration = (n: number, seq: number): Effect.Effect<Tracer.Span> =>
    Effect.suspend(() => {
      if (open?.iteration === n) return Effect.succeed(open.span)
      end(Exit.void)
      return Effect.map(
        Effect.makeSpan("rx.iteration", { parent: goal, captureStackTrace: false, attributes: { "rx.iteration": n, "rx.seq": seq } }),
        (span) => {
          open = { span, iteration: n }
          return span
        }
      )
    })

  const trace: Trace = {
    restored: (seq, n) => {
      goal.attribute("rx.seq", seq)
      goal.attribute("rx.iteration", n)
    },
    model: (effect, n, seq) =>
      Effect.flatMap(iteration(n, seq), (parent) =>
        Effect.useSpan("chat", { parent, kind: "client", captureStackTrace: false, attributes: { "gen_ai.operation.name": "chat" } }, (span) =>
          Effect.withParentSpan(effect, span).pipe(
            Effect.tapBoth({
              onSuccess: (response) =>
                Effect.sync(() => {
                  span.attribute("gen_ai.usage.input_tokens", response.usage.inputTokens)
                  span.attribute("gen_ai.usage.output_tokens", response.usage.outputTokens)
                  span.attribute("gen_ai.response.finish_reasons", [response.finishReason])
                }),
              onFailure: (error) =>
                Effect.sync(() => span.attribute("error.type", error.status === undefined ? "ModelError" : String(error.status)))
            })
          ))).pipe(Effect.annotateSpans({ "rx.iteration": n, "rx.seq": seq })),
    tool: (effect, call, n, seq) =>
      Effect.flatMap(iteration(n, seq), (parent) =>
        Effect.useSpan(`execute_tool ${call.tool}`, {
          parent,
          captureStackTrace: false,
          attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool, "gen_ai.tool.call.id": call.callId }
        }, (span) =>
          Effect.tap(Effect.withParentSpan(effect, span), (outcome) =>
            Effect.sync(() => {
              if (outcome._tag === "Success") return
              if (outcome._tag === "Waiting") return span.attribute("rx.waiting", outcome.reason)
              span.attribute("error.type", outcome.error.kind)
              span.end(now(), Exit.fail(new ToolCallFailed({ message: capped(outcome.error.message) })))
            })))).pipe(Effect.annotateSpans({ "rx.iteration": n, "rx.seq": seq })),
    committed: (events) => {
      for (const event of events) {
        const span = open === undefined || event._tag === "Terminated" || event._tag === "Suspended" ? goal : open.span
        span.event(event._tag, now(), noted(event))
        if (event._tag === "IterationCompleted" && open?.iteration === event.iteration) end(Exit.void)
      }
    }
  }
  /** The run stopped: an iteration left open (suspended, interrupted, failed) ends with it. */
  const close = (exit: Exit.Exit<unknown, unknown>) => end(exit)
  return { trace, close }
}

/** A committed event as a span event's attributes: its seq, and why, where it says. */
const noted = (event: Event.Event): Record<string, unknown> => {
  switch (event._tag) {
    case "ActionRejected":
      return { "rx.seq": event.seq, "rx.kind": event.kind, "rx.reason": capped(event.reason) }
    case "ToolFailed":
      return { "rx.seq": event.seq, "rx.kind": event.error.kind, "rx.message": capped(event.error.message) }
    case "ModelFailed":
      return { "rx.seq": event.seq, "rx.message": capped(event.message) }
    case "CancelRequested":
      return { "rx.seq": event.seq, "rx.reason": capped(event.reason) }
    case "Terminated":
    case "Suspended":
      return { "rx.seq": event.seq, "rx.reason": event.reason, "rx.detail": capped(event.detail) }
    default:
      return { "rx.seq": event.seq }
  }
}
