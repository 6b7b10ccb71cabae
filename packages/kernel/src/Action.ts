/**
 * Turn a model's answer into an action, or a rejection the model can act on. Native tool
 * calls come first; an answer with none may hold a JSON action in its text:
 * `{"tool": "<name>", "input": {...}, "thought"?: "..."}`. Free-form text is never executed.
 */
import { Either, ParseResult, Schema } from "effect"
import type * as Event from "./Event.js"
import { deeperThan, truncate } from "./internal/json.js"
import type * as LanguageModel from "./LanguageModel.js"
import type * as Tool from "./Tool.js"
import * as ToolRegistry from "./ToolRegistry.js"

/** What to do with an answer. `A` is what validating a call gives (the registry's prepared call). */
export type Decision<A = unknown> =
  | { readonly _tag: "Call"; readonly tool: string; readonly input: unknown; readonly prepared: A }
  | { readonly _tag: "Done"; readonly summary: string }
  | {
    readonly _tag: "Reject"
    readonly kind: Event.RejectionKind
    readonly reason: string
    readonly raw: string
    /** The tool's own verdict on an invalid input, as its validator worded it. */
    readonly validation?: string
  }

const rawCap = 2_000

type Reject = Extract<Decision<never>, { readonly _tag: "Reject" }>

const reject = (kind: Event.RejectionKind, reason: string, raw: string): Reject => ({
  _tag: "Reject",
  kind,
  reason,
  raw: truncate(raw, rawCap)
})

const decodeDone = Schema.decodeUnknownEither(ToolRegistry.DoneInput, { onExcessProperty: "error" })

/**
 * Decide what an answer asks for. `tools` are the specs the model was shown; `validate`
 * checks an input against its tool's Schema (the registry's `decode`).
 */
export const decide = <A>(
  response: LanguageModel.Response,
  tools: ReadonlyArray<Tool.Spec>,
  validate: (tool: string, input: unknown) => Either.Either<A, string>,
  limits: { readonly maxInputDepth: number } = { maxInputDepth: 64 }
): Decision<A> => {
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
      "your reply was cut off by the output token limit, so it was not executed; reply with one shorter tool call",
      response.toolCalls[0]?.arguments ?? response.text
    )
  }
  const call = response.toolCalls[0]
  const parsed = call !== undefined ? parseArguments(call) : parseTextAction(response.text)
  if (Either.isLeft(parsed)) return parsed.left
  const { input, tool } = parsed.right
  if (deeperThan(input, limits.maxInputDepth)) {
    return reject("invalid_input", `the input of ${tool} nests more than ${limits.maxInputDepth} levels deep; send a flatter input`, tool)
  }
  if (tool === ToolRegistry.doneName) {
    return Either.match(decodeDone(input), {
      onLeft: (error) =>
        reject("invalid_input", `invalid input for done: ${ParseResult.TreeFormatter.formatErrorSync(error)}`, JSON.stringify(input)),
      onRight: ({ summary }) => ({ _tag: "Done", summary })
    })
  }
  if (!tools.some((spec) => spec.name === tool)) {
    const names = [...tools.map((spec) => spec.name), ToolRegistry.doneName].join(", ")
    return reject("unknown_tool", `there is no tool named "${tool}"; available tools: ${names}`, tool)
  }
  return Either.match(validate(tool, input), {
    onLeft: (validation): Decision<A> => ({
      ...reject("invalid_input", `invalid input for ${tool}: ${validation}`, JSON.stringify(input)),
      validation
    }),
    onRight: (prepared): Decision<A> => ({ _tag: "Call", tool, input, prepared })
  })
}

type Parsed = Either.Either<{ readonly tool: string; readonly input: unknown }, Decision<never>>

const parseArguments = (call: LanguageModel.ToolCall): Parsed => {
  const text = call.arguments.trim() === "" ? "{}" : call.arguments
  return Either.match(parseJson(text), {
    onLeft: (error) =>
      Either.left(reject("bad_json", `the arguments of ${call.name} are not valid JSON (${error}); send one JSON object`, call.arguments)),
    onRight: (input) =>
      isObject(input)
        ? Either.right({ tool: call.name, input })
        : Either.left(reject("bad_json", `the arguments of ${call.name} must be a JSON object`, call.arguments))
  })
}

const noAction = (text: string) =>
  reject(
    "no_action",
    `your reply held no tool call, so nothing was executed; call exactly one tool, or ${ToolRegistry.doneName} when the goal is achieved`,
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

/** The answer as the log keeps it beside its `ToolStarted`: the started call's long arguments left out. */
export const withoutArguments = (response: LanguageModel.Response): LanguageModel.Response => {
  const [call, ...rest] = response.toolCalls
  if (call === undefined || call.arguments.length <= inlineArguments) return response
  return { ...response, toolCalls: [{ ...call, arguments: "", argumentsInToolStarted: true }, ...rest] }
}

/** Characters of each text an oversized answer keeps in the log. */
const oversizeKept = 2_000

/** An answer longer than `max` characters, cut to what the log keeps and marked, so it is rejected. */
export const cap = (response: LanguageModel.Response, max: number): LanguageModel.Response => {
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
