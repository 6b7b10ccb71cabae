/** The pure part of `Eval` (it re-exports all of it), apart from the log-reading entry that loads `evals` lazily. */
import { Action, Answer, Behaviour, Event, LanguageModel, Prompt, Replay, State, Tool, ToolRegistry } from "@rx/kernel"
import { Clock, Effect, Either, Option, Schema } from "effect"
import type * as Settings from "../Settings.js"

/**
 * How a candidate's decision compares with the recorded one: the same calls (tools and inputs, in
 * order); the same tools with other input; other tools; no valid action where the recording had
 * one; or no answer at all (`failed`: the request failed after the model adapter's own retries).
 */
export const Kind = Schema.Literal("same", "same_tools", "other_tools", "no_action", "failed")
export type Kind = typeof Kind.Type

/** Every kind, in the order reports show them. */
export const kinds: ReadonlyArray<Kind> = Kind.literals

/** A call a decision makes; `done` is a call too (its input the summary). */
export const Call = Schema.Struct({ tool: Schema.String, input: Schema.Unknown })
export type Call = typeof Call.Type

/** What of an answer was not executed, and why (as the model is told). */
export const Rejection = Schema.Struct({ kind: Schema.String, reason: Schema.String, tool: Schema.NullOr(Schema.String) })
export type Rejection = typeof Rejection.Type

/** A decoded answer: the calls it makes, in order, and what was rejected. */
export const Decision = Schema.Struct({ calls: Schema.Array(Call), rejected: Schema.Array(Rejection) })
export type Decision = typeof Decision.Type

/** A person's decision on a recorded call: the recorded decision was theirs to allow. */
export const Approval = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  approved: Schema.Boolean,
  by: Schema.String,
  reason: Schema.String
})
export type Approval = typeof Approval.Type

/** One recorded model decision, asked again. */
export const Step = Schema.Struct({
  /** The iteration (the step `rx inspect --step` shows) and the seq of its `ModelResponded`. */
  iteration: Schema.NonNegativeInt,
  seq: Schema.NonNegativeInt,
  kind: Kind,
  recorded: Decision,
  /** Null when the request failed. */
  candidate: Schema.NullOr(Decision),
  /** What people decided on the recorded calls (empty when no call needed approval). */
  approvals: Schema.Array(Approval),
  /** Why the request failed. */
  error: Schema.NullOr(Schema.String),
  usage: LanguageModel.Usage,
  durationMs: Schema.NonNegativeInt
})
export type Step = typeof Step.Type

const Counts = Schema.Struct({
  same: Schema.NonNegativeInt,
  same_tools: Schema.NonNegativeInt,
  other_tools: Schema.NonNegativeInt,
  no_action: Schema.NonNegativeInt,
  failed: Schema.NonNegativeInt
})

/** Over some steps: how many of each kind, the share that agreed, tokens, time per request. */
export const Summary = Schema.Struct({
  requests: Schema.NonNegativeInt,
  byKind: Counts,
  /** `same` over all requests (a failed request counts against it); 1 with no request. */
  agreement: Schema.Number,
  /** Tokens the candidate spent, and those the recorded answers spent. */
  usage: LanguageModel.Usage,
  recordedUsage: LanguageModel.Usage,
  durationMs: Schema.NonNegativeInt,
  /** Mean time per request, in milliseconds. */
  msPerRequest: Schema.NonNegativeInt
})
export type Summary = typeof Summary.Type

export const GoalReport = Schema.Struct({
  goalId: Schema.String,
  goal: Schema.String,
  behaviour: Schema.Int,
  steps: Schema.Array(Step),
  summary: Summary
})
export type GoalReport = typeof GoalReport.Type

/** The comparison of some goals, each on its own and all together. */
export const Report = Schema.Struct({ goals: Schema.Array(GoalReport), summary: Summary })
export type Report = typeof Report.Type

/** A log that cannot be evaluated: it does not start with `GoalSubmitted`. */
export class EvalError extends Schema.TaggedError<EvalError>()("@rx/host/EvalError", { message: Schema.String }) {}

/** What to ask with, besides the model in context. */
export interface Options {
  /** Instructions shown in place of those each goal recorded ("" shows none). */
  readonly instructions?: string | undefined
  /** Requests in flight at once, over all goals (default 1). */
  readonly concurrency?: number | undefined
  /** Called as each request is answered (progress). */
  readonly onStep?: ((goalId: string, step: Step) => Effect.Effect<void>) | undefined
}

/** A recorded model decision: the State its request was built from, the answer as the model gave it, and people's decisions on it. */
export interface Recorded {
  readonly state: State.State
  readonly seq: number
  readonly iteration: number
  readonly at: number
  readonly response: LanguageModel.Response
  readonly approvals: ReadonlyArray<Approval>
  /** The verdicts the tools gave on the recorded calls' inputs, by call id (an input refused). */
  readonly verdicts: ReadonlyMap<string, string>
}

/** Each recorded model decision of a goal's log, with the State before it: one fold over the log. */
export const recorded = (events: ReadonlyArray<Event.Event>): Either.Either<ReadonlyArray<Recorded>, EvalError | Behaviour.UnsupportedBehaviour> => {
  const first = events[0]
  if (first === undefined || first._tag !== "GoalSubmitted") return Either.left(new EvalError({ message: "a goal's log must start with GoalSubmitted" }))
  if (!Behaviour.isSupported(first.behaviour)) return Either.left(new Behaviour.UnsupportedBehaviour({ goalId: first.goalId, version: first.behaviour }))
  const out: Array<Recorded> = []
  let state = State.empty(first.goalId)
  for (const [i, event] of events.entries()) {
    if (event._tag === "ModelResponded") {
      const after = iterationAfter(events, i)
      const requested = new Map(after.flatMap((e) => (e._tag === "ApprovalRequested" ? [[e.callId, e.tool] as const] : [])))
      out.push({
        state,
        seq: event.seq,
        iteration: event.iteration,
        at: event.at,
        response: Replay.answerAt(events, i) ?? event.response,
        approvals: after.flatMap((e) =>
          e._tag === "ApprovalDecided" ? [{ callId: e.callId, tool: requested.get(e.callId) ?? "", approved: e.approved, by: e.by, reason: e.reason }] : []
        ),
        verdicts: new Map(after.flatMap((e) => (e._tag === "ActionRejected" && e.validation !== undefined ? [[Event.callId(first.goalId, e.iteration, e.index), e.validation] as const] : [])))
      })
    }
    state = State.reduce(state, event)
  }
  return Either.right(out)
}

/** The events of the iteration after its answer at `i`, up to the next answer. */
const iterationAfter = (events: ReadonlyArray<Event.Event>, i: number): ReadonlyArray<Event.Event> => {
  const out: Array<Event.Event> = []
  const iteration = events[i]?.iteration
  for (let j = i + 1; j < events.length; j++) {
    const event = events[j] as Event.Event
    if (event._tag === "ModelResponded" || event.iteration !== iteration) break
    out.push(event)
  }
  return out
}

/** The request the model received for a recorded decision, exactly, or with other instructions. */
export const request = (decision: Recorded, instructions?: string): LanguageModel.Request =>
  Prompt.build(instructions === undefined ? decision.state : { ...decision.state, instructions })

/** A check of a call's input: the tools' own (a `ToolRegistry`), never running them. */
export type Validate = (call: Tool.Call) => Either.Either<unknown, string>

/**
 * Decode an answer given in `state` as the runner does (`Answer.step`: the goal's behaviour
 * version, its limits, the repairs), calling no tool: each call that would start is noted, a
 * stand-in outcome recorded, and the answer's next calls decided. Every call is decided as if the
 * approval policy allowed it, so a call a person was asked about compares as a call.
 */
export const decode = (state: State.State, response: LanguageModel.Response, at: number, validate: Validate): Decision => {
  const { goalId } = state
  const iteration = state.completed + 1
  const rules = Behaviour.rules(state.behaviour)
  const capped = rules.answerCap ? Action.cap(response, state.options.maxAnswerChars, rules.boundedAnswer) : response
  const prepare: ToolRegistry.Service["prepare"] = (call) =>
    Either.map(validate(call), (): ToolRegistry.Prepared => ({ call, run: Effect.succeed(noRun), recover: Effect.succeedNone }))
  const context: Answer.Context = { decide: true, now: () => at, prepare }
  let draft: State.State = { ...state, options: { ...state.options, approval: {} } }
  const calls: Array<Call> = []
  const rejected: Array<Rejection> = []
  let step = Answer.step(draft, [{ _tag: "ModelResponded", goalId, seq: draft.seq, iteration, at, response: capped }], context)
  for (;;) {
    for (const event of step.batch) {
      if (event._tag === "ToolStarted") calls.push({ tool: event.tool, input: event.input })
      if (event._tag === "ActionRejected") rejected.push({ kind: event.kind, reason: event.reason, tool: event.tool ?? null })
      if (event._tag === "Terminated" && event.reason === "done") calls.push({ tool: ToolRegistry.doneName, input: { summary: event.detail } })
    }
    draft = step.after ?? State.fold(draft, step.batch)
    const pending = draft.pending
    if (step.call === undefined || pending === null) break
    const { callId, tool } = pending
    step = Answer.step(draft, [{ _tag: "ToolSucceeded", goalId, seq: draft.seq, iteration, at, callId, tool, output: null, durationMs: 0 }], context)
  }
  return { calls, rejected }
}

const noRun = Tool.failure("fatal", "rx eval runs no tool")

/** How `candidate` compares with `recorded`. */
export const compare = (recorded: Decision, candidate: Decision): Exclude<Kind, "failed"> => {
  if (canonical(recorded.calls) === canonical(candidate.calls)) return "same"
  if (candidate.calls.length === 0) return "no_action"
  const tools = (d: Decision) => d.calls.map((c) => c.tool).join("\n")
  return tools(recorded) === tools(candidate) ? "same_tools" : "other_tools"
}

/** JSON text with object keys sorted: inputs compare whatever their key order. */
const canonical = (value: unknown): string => JSON.stringify(sortKeys(value)) ?? "null"
const sortKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]))
  }
  return value
}

/**
 * The validator of the `ToolRegistry` in context, if any, that runs nothing; a tool it does not
 * know (or with no registry) takes any input, as recorded specs cannot check one.
 */
const validator: Effect.Effect<Validate> = Effect.map(Effect.serviceOption(ToolRegistry.ToolRegistry), (registry) =>
  Option.match(registry, {
    onNone: () => (call) => Either.right(call.input),
    onSome: (r) => (call) => (r.specs.some((spec) => spec.name === call.tool) ? r.prepare(call) : Either.right(call.input))
  }))

/** Ask one recorded decision again and compare. */
const ask = (decision: Recorded, validate: Validate, options: Options) =>
  Effect.gen(function*() {
    const model = yield* LanguageModel.LanguageModel
    const before = yield* Clock.currentTimeMillis
    const answer = yield* Effect.either(model.generate(request(decision, options.instructions)))
    const durationMs = Math.max(0, Math.round((yield* Clock.currentTimeMillis) - before))
    // The recorded calls are read with the verdicts the tools gave then (as a replay reads them); the candidate's with the validator now.
    const recorded = decode(decision.state, decision.response, decision.at, (call) => {
      const verdict = decision.verdicts.get(call.callId)
      return verdict === undefined ? Either.right(call.input) : Either.left(verdict)
    })
    const base = { iteration: decision.iteration, seq: decision.seq, recorded, approvals: decision.approvals, durationMs }
    if (Either.isLeft(answer)) {
      return { ...base, kind: "failed", candidate: null, error: answer.left.message, usage: noUsage } satisfies Step
    }
    const candidate = decode(decision.state, answer.right, decision.at, validate)
    return { ...base, kind: compare(recorded, candidate), candidate, error: null, usage: answer.right.usage } satisfies Step
  })

const noUsage: LanguageModel.Usage = { inputTokens: 0, outputTokens: 0 }

/** Sum up steps; `recordedUsage` are the tokens the recorded answers spent. */
export const summarize = (steps: ReadonlyArray<Step>, recordedUsage: LanguageModel.Usage): Summary => {
  const byKind = { same: 0, same_tools: 0, other_tools: 0, no_action: 0, failed: 0 }
  let inputTokens = 0
  let outputTokens = 0
  let durationMs = 0
  for (const step of steps) {
    byKind[step.kind]++
    inputTokens += step.usage.inputTokens
    outputTokens += step.usage.outputTokens
    durationMs += step.durationMs
  }
  return {
    requests: steps.length,
    byKind,
    agreement: steps.length === 0 ? 1 : byKind.same / steps.length,
    usage: { inputTokens, outputTokens },
    recordedUsage,
    durationMs,
    msPerRequest: steps.length === 0 ? 0 : Math.round(durationMs / steps.length)
  }
}

const add = (a: LanguageModel.Usage, b: LanguageModel.Usage): LanguageModel.Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens
})

/**
 * Ask every recorded model decision of these goals' logs again of the `LanguageModel` in context
 * and compare (see the module). A request that fails is a `failed` step, never an error: the rest
 * go on. Requests run `concurrency` at a time over all goals, each as a run makes it (the model
 * Layer's own timeouts and retries apply). Call inputs are checked with the `ToolRegistry` in
 * context, when there is one (it runs nothing).
 */
export const run = (
  logs: ReadonlyArray<ReadonlyArray<Event.Event>>,
  options: Options = {}
): Effect.Effect<Report, EvalError | Behaviour.UnsupportedBehaviour, LanguageModel.LanguageModel> =>
  Effect.gen(function*() {
    const validate = yield* validator
    const goals = yield* Effect.forEach(logs, (events) =>
      Effect.map(recorded(events), (decisions) => {
        const submitted = events[0] as Event.Of<"GoalSubmitted">
        return { submitted, decisions }
      }))
    const jobs = goals.flatMap(({ decisions, submitted }, g) => decisions.map((decision) => ({ g, decision, goalId: submitted.goalId })))
    const steps = yield* Effect.forEach(
      jobs,
      ({ decision, goalId }) => Effect.tap(ask(decision, validate, options), (step) => (options.onStep === undefined ? Effect.void : options.onStep(goalId, step))),
      { concurrency: Math.max(1, options.concurrency ?? 1) }
    )
    const reports = goals.map(({ decisions, submitted }, g): GoalReport => {
      const own = steps.filter((_, j) => jobs[j]?.g === g)
      const spent = decisions.reduce((sum, d) => add(sum, d.response.usage), noUsage)
      return { goalId: submitted.goalId, goal: submitted.goal, behaviour: submitted.behaviour, steps: own, summary: summarize(own, spent) }
    })
    return { goals: reports, summary: summarize(steps, reports.reduce((sum, r) => add(sum, r.summary.recordedUsage), noUsage)) }
  })

/** One goal's log: `run` of it alone. */
export const goal = (events: ReadonlyArray<Event.Event>, options: Options = {}) =>
  Effect.map(run([events], options), (report): GoalReport => report.goals[0] as GoalReport)

/** Whether a report meets a gate: its agreement is at least `min` (0 to 1). */
export const passes = (report: Report, min: number): boolean => report.summary.agreement >= min

/** `rx eval` over a log on this machine: the goals named (else every terminated one), and what to tell as it goes. */
export interface LogRequest {
  readonly goalIds: ReadonlyArray<string>
  /** The settings of `Settings.evalKeys`: the log, the model, an instructions file, the gate. */
  readonly given: Settings.Given
  /** Requests in flight at once (default 1). */
  readonly concurrency: Option.Option<number>
  /** Once the goals are read: how many, how many requests, and the model asked. */
  readonly starting?: ((start: { readonly goals: number; readonly requests: number; readonly model: string }) => Effect.Effect<void>) | undefined
  readonly onStep?: Options["onStep"]
}

/** What `fromLog` found, with the model asked and the gate, if set. */
export interface LogReport {
  readonly report: Report
  readonly model: string
  readonly minAgreement: number | undefined
}

