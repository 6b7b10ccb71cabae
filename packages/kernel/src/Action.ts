/**
 * Turn a model's answer into an action, or a rejection the model can act on. Native tool
 * calls come first; an answer with none may hold a JSON action in its text:
 * `{"tool": "<name>", "input": {...}, "thought"?: "..."}`. Free-form text is never executed.
 */
import { Repair } from "@rx/formats"
import { Either, Schema } from "effect"
import type * as Event from "./Event.js"
import * as Issues from "./internal/issues.js"
import { deeperThan, truncate } from "./internal/json.js"
import type * as LanguageModel from "./LanguageModel.js"
import type * as Tool from "./Tool.js"
import * as ToolRegistry from "./ToolRegistry.js"

/** What to do with an answer. `A` is what validating a call gives (the registry's prepared call). */
export type Decision<A = unknown> =
  | {
    readonly _tag: "Call"
    readonly tool: string
    readonly input: unknown
    readonly prepared: A
    /** The repairs that made the call (behaviour 3), recorded with it. */
    readonly repair?: ReadonlyArray<Repair.Kind> | undefined
  }
  | { readonly _tag: "Done"; readonly summary: string }
  | {
    readonly _tag: "Reject"
    readonly kind: Event.RejectionKind
    readonly reason: string
    readonly raw: string
    /** The tool's own verdict on an invalid input, as its validator worded it. */
    readonly validation?: string
    /** For one call of an answer: the tool it named. */
    readonly tool?: string
    /** The repairs applied before the call was refused (behaviour 3). */
    readonly repair?: ReadonlyArray<Repair.Kind> | undefined
  }

const rawCap = 2_000

type Reject = Extract<Decision<never>, { readonly _tag: "Reject" }>

const reject = (kind: Event.RejectionKind, reason: string, raw: string): Reject => ({
  _tag: "Reject",
  kind,
  reason,
  raw: truncate(raw, rawCap)
})

const decodeDone = Schema.decodeUnknownEither(ToolRegistry.DoneInput, { errors: "all", onExcessProperty: "error" })

/** What deciding needs besides the answer: the rules of the goal's behaviour version and its options. */
export interface Limits {
  readonly maxInputDepth: number
  /** Every call of an answer is decided; otherwise only the first. */
  readonly multiCall: boolean
  readonly maxCallsPerAnswer: number
  /** The calls past `maxCallsPerAnswer` are one rejection (`dropped`), not one each. */
  readonly boundedAnswer?: boolean | undefined
  /** An answer stopped by a content filter is rejected, never run. */
  readonly withheldRejected?: boolean | undefined
  /**
   * The repair step (`Repair`, behaviour 3): the tools offered, whose names and parameter types
   * a call written as text is read against. Without it, answers are read as rx 0.2 read them.
   */
  readonly repair?: ReadonlyArray<Tool.Spec> | undefined
  /** A call written as text runs only when it is the answer, never quoted or echoed (behaviour 5: `Repair` decoding 5). */
  readonly answerIsTheCall?: boolean | undefined
  /** With `answerIsTheCall`: the goal's tool results the model was shown, where an echoed call is found. */
  readonly results?: ReadonlyArray<string> | undefined
}

const defaultLimits: Limits = { maxInputDepth: 64, multiCall: false, maxCallsPerAnswer: 1 }

/**
 * The calls an answer makes, each parsed or rejected on its own, and how many calls past the cap
 * it dropped as a whole (`dropped`, then one rejection says so); or why the answer as a whole is
 * not executed.
 */
export type Plan = Reject | { readonly _tag: "Calls"; readonly calls: ReadonlyArray<Parsed>; readonly dropped: number }

/** What the model is told of the calls past the cap, dropped as a whole. */
export const droppedReason = (calls: number, cap: number): string =>
  `your reply made ${calls} tool calls, but only the first ${cap} of an answer run: the other ${calls - cap} (calls ${cap + 1} to ${calls}) were not run; send at most ${cap} calls per answer`

/** Read an answer's calls, in order. */
export const plan = (response: LanguageModel.Response, limits: Limits = defaultLimits): Plan => {
  if (response.oversize !== undefined) {
    return reject(
      "too_large",
      `your reply was ${response.oversize} characters long, more than this run allows, so it was cut and not executed; send less at once (write a large file in parts with edit_file)`,
      response.toolCalls[0]?.arguments ?? response.text
    )
  }
  if (response.finishReason === "length") {
    return reject(
      "cut_off",
      "your reply was cut off by the output token limit, so it was not executed; reply with shorter tool calls",
      response.toolCalls[0]?.arguments ?? response.text
    )
  }
  if (response.finishReason === "content_filter" && limits.withheldRejected === true) {
    return reject(
      "cut_off",
      "your reply was stopped by the server's content filter (finish_reason content_filter), so none of it was executed; take another approach",
      response.toolCalls[0]?.arguments ?? response.text
    )
  }
  const [first] = response.toolCalls
  const parseArguments: (call: LanguageModel.ToolCall, index: number) => Parsed = limits.repair === undefined
    ? parseArgumentsV2
    : repairedArguments(limits.repair, limits.answerIsTheCall === true)
  if (first === undefined) {
    const action = limits.repair === undefined ? parseTextAction(response.text) : repairedText(response, limits.repair, limits)
    return Either.isLeft(action) ? action.left : { _tag: "Calls", calls: [action], dropped: 0 }
  }
  if (!limits.multiCall) {
    const call = parseArguments(first, 0)
    return Either.isLeft(call) ? call.left : { _tag: "Calls", calls: [call], dropped: 0 }
  }
  if (limits.boundedAnswer === true) {
    const kept = response.toolCalls.slice(0, limits.maxCallsPerAnswer)
    return { _tag: "Calls", calls: kept.map((call, i) => parseArguments(call, i)), dropped: response.toolCalls.length - kept.length }
  }
  return {
    _tag: "Calls",
    calls: response.toolCalls.map((call, i) =>
      i < limits.maxCallsPerAnswer
        ? parseArguments(call, i)
        : Either.left({
          ...reject("too_many_calls", `only the first ${limits.maxCallsPerAnswer} calls of an answer run; send this one again later`, call.arguments),
          tool: call.name
        })
    ),
    dropped: 0
  }
}

/**
 * Decide one call of an answer. `tools` are the specs the model was shown; `validate` checks
 * an input against its tool's Schema (the registry's `prepare`).
 */
export const decideCall = <A>(
  call: Parsed,
  tools: ReadonlyArray<Tool.Spec>,
  validate: (tool: string, input: unknown) => Either.Either<A, string>,
  limits: Limits = defaultLimits
): Decision<A> => {
  if (Either.isLeft(call)) return call.left
  const { input, repair, tool } = call.right
  const repaired = repair === undefined || repair.length === 0 ? {} : { repair }
  const rejectCall = (kind: Event.RejectionKind, reason: string, raw: string): Reject => ({ ...reject(kind, reason, raw), tool, ...repaired })
  if (deeperThan(input, limits.maxInputDepth)) {
    return rejectCall("invalid_input", `the input of ${tool} nests more than ${limits.maxInputDepth} levels deep; send a flatter input`, tool)
  }
  if (tool === ToolRegistry.doneName) {
    return Either.match(decodeDone(input), {
      onLeft: (error) =>
        rejectCall("invalid_input", `invalid input for done: ${Issues.format(error)}`, JSON.stringify(input)),
      onRight: ({ summary }): Decision<A> => ({ _tag: "Done", summary })
    })
  }
  if (!tools.some((spec) => spec.name === tool)) {
    const names = [...tools.map((spec) => spec.name), ToolRegistry.doneName].join(", ")
    return rejectCall("unknown_tool", `there is no tool named "${tool}"; available tools: ${names}`, tool)
  }
  return Either.match(validate(tool, input), {
    onLeft: (validation): Decision<A> => ({
      ...rejectCall("invalid_input", `invalid input for ${tool}: ${validation}`, JSON.stringify(input)),
      validation
    }),
    onRight: (prepared): Decision<A> => ({ _tag: "Call", tool, input, prepared, ...repaired })
  })
}

/** Decide an answer's first call: the whole decision for a model that makes one call per answer. */
export const decide = <A>(
  response: LanguageModel.Response,
  tools: ReadonlyArray<Tool.Spec>,
  validate: (tool: string, input: unknown) => Either.Either<A, string>,
  limits: Pick<Limits, "maxInputDepth"> = defaultLimits
): Decision<A> => {
  const planned = plan(response, { ...defaultLimits, ...limits })
  if (planned._tag === "Reject") return planned
  const [first] = planned.calls
  return first === undefined ? noAction(response.text) : decideCall(first, tools, validate, { ...defaultLimits, ...limits })
}

/** One call of an answer, parsed (with the repairs that made it, behaviour 3), or rejected as a call. */
export type Parsed = Either.Either<{ readonly tool: string; readonly input: unknown; readonly repair?: ReadonlyArray<Repair.Kind> }, Reject>

const parseArgumentsV2 = (call: LanguageModel.ToolCall): Parsed => {
  const text = call.arguments.trim() === "" ? "{}" : call.arguments
  const bad = (reason: string): Parsed => Either.left({ ...reject("bad_json", reason, call.arguments), tool: call.name })
  return Either.match(parseJson(text), {
    onLeft: (error) => bad(`the arguments of ${call.name} are not valid JSON (${error}); send one JSON object`),
    onRight: (input) => (isObject(input) ? Either.right({ tool: call.name, input }) : bad(`the arguments of ${call.name} must be a JSON object`))
  })
}

/**
 * A native call, repaired (behaviour 3): an entry with no function is refused alone (the model is
 * told), a `functions.` prefix on an offered name is dropped, arguments encoded twice are decoded.
 */
const repairedArguments = (tools: ReadonlyArray<Tool.Spec>, tokens: boolean) => (call: LanguageModel.ToolCall, index: number): Parsed => {
  if (call.name === "") {
    return Either.left({
      ...reject(
        "bad_json",
        `tool call ${index + 1} of your reply has no function name, so it was not run; give every tool call a function with its name and JSON arguments`,
        call.arguments
      ),
      tool: ""
    })
  }
  const named = Repair.name(call.name, tools, ToolRegistry.doneName)
  const args = Repair.input(call.arguments)
  if ("error" in args) {
    return Either.left({ ...reject("bad_json", `${args.error.replace(/^the arguments/, `the arguments of ${named.name}`)}; send one JSON object`, call.arguments), tool: named.name })
  }
  const leaked = tokens ? Repair.leaked(args.input) : []
  if (leaked.length > 0) return Either.left({ ...reject("bad_json", leakedReason(named.name, leaked), call.arguments), tool: named.name })
  const repair: Array<Repair.Kind> = []
  if (named.repaired) repair.push("name_prefix")
  if (args.repaired) repair.push("double_encoded")
  return Either.right(repair.length === 0 ? { tool: named.name, input: args.input } : { tool: named.name, input: args.input, repair })
}

/** Behaviour 5: what the model is told of arguments that hold special tokens. */
const leakedReason = (tool: string, tokens: ReadonlyArray<string>): string =>
  `the arguments of ${tool} hold a model's special tokens (${tokens.slice(0, 5).join(", ")}), which leak from a broken chat template or decode, so it was not run; send the arguments again without them`

/** Whether the model was asked for a JSON action in its text (JSON mode) rather than tool calls. */
const asksJson = (response: LanguageModel.Response): boolean => response.format === "json_action"

/**
 * The text of an answer with no native calls, repaired (behaviour 3): a call written in a model
 * family's text form, else a JSON action; rejections say what was wrong in the form asked for.
 */
const repairedText = (response: LanguageModel.Response, tools: ReadonlyArray<Tool.Spec>, limits: Limits): Parsed => {
  const decoding = limits.answerIsTheCall === true ? 5 : 3
  const read = Repair.text(response.text, { tools, done: ToolRegistry.doneName, json: asksJson(response), decoding, results: limits.results })
  switch (read._tag) {
    case "Call":
      return Either.right({ tool: read.call.tool, input: read.call.input, repair: read.call.repairs })
    case "Refused":
      return Either.left(reject(read.refusal.kind, read.refusal.reason, response.text))
    case "None":
      return jsonAction(read.text, response.text, read.repairs, asksJson(response), tools, decoding === 5)
  }
}

const jsonForm = `{"tool": "<name>", "input": {...}}`

/**
 * A JSON action, never dropping what the model gave: its input under `arguments` or
 * `parameters` is taken (`input_key`); other keys, or input given twice, are a rejection.
 */
const jsonAction = (
  text: string,
  raw: string,
  repairs: ReadonlyArray<Repair.Kind>,
  json: boolean,
  tools: ReadonlyArray<Tool.Spec>,
  v5: boolean
): Parsed => {
  const trimmed = text.trim()
  const body = fence.exec(trimmed)?.[1] ?? trimmed
  if (!body.startsWith("{")) {
    return Either.left(reject(
      "no_action",
      json
        ? `your reply held no JSON action, so nothing was executed; answer with one JSON object ${jsonForm}, with the tool ${ToolRegistry.doneName} when the goal is achieved`
        : `your reply held no tool call, so nothing was executed (a call written inside other text is not run); call a tool, or ${ToolRegistry.doneName} when the goal is achieved`,
      raw
    ))
  }
  const value = parseJson(body)
  if (Either.isLeft(value)) {
    return Either.left(reject(
      "bad_json",
      json
        ? `your JSON action is not valid JSON (${value.left}); answer with one JSON object ${jsonForm}`
        : `your reply held text that starts like JSON but is not valid JSON (${value.left}), so nothing was executed; make a tool call rather than writing JSON in the text`,
      raw
    ))
  }
  const action = value.right
  if (!isObject(action) || typeof action.tool !== "string") {
    return Either.left(reject(
      "bad_json",
      json
        ? `a JSON action must look like ${jsonForm}`
        : `your reply held JSON in its text that is not a tool call, so nothing was executed; make a tool call`,
      raw
    ))
  }
  const keys = v5 ? ["input", "arguments", "parameters", "args"] : ["input", "arguments", "parameters"]
  const given = keys.filter((key) => key in action)
  const other = Object.keys(action).filter((key) => !["tool", "thought", ...keys].includes(key))
  const form = json ? `answer with ${jsonForm}` : "make a tool call with its arguments"
  if (given.length > 1 || other.length > 0) {
    const found = given.length > 1 ? `its arguments twice (${given.join(", ")})` : `keys other than tool, input and thought (${other.join(", ")})`
    return Either.left(reject("bad_json", `your JSON action for ${action.tool} has ${found}, so nothing was executed; ${form}, all arguments in "input"`, raw))
  }
  const [key] = given
  const args = Repair.input(key === undefined ? undefined : action[key])
  if ("error" in args) {
    return Either.left(reject("bad_json", `the "${key ?? "input"}" of your JSON action for ${action.tool}: ${args.error}; ${form}`, raw))
  }
  const named = Repair.name(action.tool, tools, ToolRegistry.doneName)
  const leaked = v5 ? Repair.leaked(args.input) : []
  if (leaked.length > 0) return Either.left(reject("bad_json", `${leakedReason(named.name, leaked)}; ${form}`, raw))
  const repair: Array<Repair.Kind> = [...repairs]
  if (named.repaired) repair.push("name_prefix")
  if (key !== undefined && key !== "input") repair.push("input_key")
  if (args.repaired) repair.push("double_encoded")
  return Either.right(repair.length === 0 ? { tool: named.name, input: args.input } : { tool: named.name, input: args.input, repair })
}

const noAction = (text: string) =>
  reject(
    "no_action",
    `your reply held no tool call, so nothing was executed; call a tool, or ${ToolRegistry.doneName} when the goal is achieved`,
    text
  )

const fence = /^```[a-zA-Z]*\s*([\s\S]*?)\s*```$/

/** A JSON action in plain text, for models that answer with constrained JSON instead of tool calls. */
const parseTextAction = (text: string): Parsed => {
  const trimmed = text.trim()
  const body = fence.exec(trimmed)?.[1] ?? trimmed
  if (!body.startsWith("{")) return Either.left(noAction(text))
  const value = parseJson(body)
  if (Either.isLeft(value)) {
    return Either.left(reject("bad_json", `your JSON action is not valid JSON (${value.left})`, text))
  }
  const action = value.right
  if (!isObject(action) || typeof action.tool !== "string") {
    return Either.left(
      reject("bad_json", `a JSON action must look like {"tool": "<name>", "input": {...}}`, text)
    )
  }
  const input = action.input ?? {}
  if (!isObject(input)) {
    return Either.left(reject("bad_json", `the "input" of a JSON action must be an object`, text))
  }
  return Either.right({ tool: action.tool, input })
}

const parseJson = (text: string): Either.Either<unknown, string> =>
  Either.try({ try: (): unknown => JSON.parse(text), catch: (error) => (error instanceof Error ? error.message : String(error)) })

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/** Arguments longer than this are recorded once, as the `ToolStarted` input. */
const inlineArguments = 1_024

/** The answer as the log keeps it beside the `ToolStarted` of call `index`: that call's long arguments left out. */
export const withoutArguments = (response: LanguageModel.Response, index: number): LanguageModel.Response => {
  const call = response.toolCalls[index]
  if (call === undefined || call.arguments.length <= inlineArguments) return response
  return { ...response, toolCalls: response.toolCalls.map((c, i) => (i === index ? { ...c, arguments: "", argumentsInToolStarted: true as const } : c)) }
}

/** Characters of each text an oversized answer keeps in the log. */
const oversizeKept = 2_000
/** Characters of each call's id and name an oversized answer keeps (bounded answers). */
const oversizeNameKept = 200
/** Calls an oversized answer keeps in the log (bounded answers); it is rejected whole anyway. */
export const oversizeCallsKept = 8
/** What a call's framing in the log costs beyond its id, name and arguments (bounded answers count it). */
export const callFraming = 48

/**
 * The size of an answer as `maxAnswerChars` counts it: its text and each call's name and
 * arguments; with `bounded`, also each call's id and framing, so the recorded answer is bounded.
 */
export const size = (response: LanguageModel.Response, bounded = false): number => {
  let total = response.text.length
  for (const call of response.toolCalls) {
    total += call.name.length + call.arguments.length
    if (bounded) total += call.id.length + callFraming
  }
  return total
}

/**
 * An answer longer than `max` characters, cut to what the log keeps and marked, so it is rejected.
 * With `bounded` (behaviour 3), ids and framing count too, and only the first calls are kept, so
 * what is recorded is bounded however many calls the answer made. An answer already cut (marked)
 * is returned as it is, so cutting again (a replay) changes nothing.
 */
export const cap = (response: LanguageModel.Response, max: number, bounded = false): LanguageModel.Response => {
  if (response.oversize !== undefined) return response
  const total = size(response, bounded)
  if (total <= max) return response
  const calls = bounded ? response.toolCalls.slice(0, oversizeCallsKept) : response.toolCalls
  return {
    ...response,
    text: truncate(response.text, oversizeKept),
    toolCalls: calls.map((call) =>
      bounded
        ? { ...call, id: truncate(call.id, oversizeNameKept), name: truncate(call.name, oversizeNameKept), arguments: truncate(call.arguments, oversizeKept) }
        : { ...call, arguments: truncate(call.arguments, oversizeKept) }
    ),
    oversize: total
  }
}
