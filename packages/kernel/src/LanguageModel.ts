/**
 * The model behind the loop. The kernel builds a `Request` from State and gets a `Response`
 * back; adapters in @rx/llm speak to real servers, and the scripted Layer here answers from a
 * list, for tests and demos.
 */
import { Context, Effect, Layer, Ref, Schema } from "effect"
import * as Tool from "./Tool.js"

/** A tool call as the model made it; `arguments` is the raw JSON text, decoded by the kernel. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  /**
   * In the log only: the arguments were left out of `ModelResponded` because the call's
   * `ToolStarted` holds them as its input, so a large input is stored once.
   */
  argumentsInToolStarted: Schema.optional(Schema.Literal(true))
})
export type ToolCall = typeof ToolCall.Type

/** A conversation message, independent of any provider's wire format. */
export const Message = Schema.Union(
  Schema.Struct({ role: Schema.Literal("user"), content: Schema.String }),
  Schema.Struct({ role: Schema.Literal("assistant"), content: Schema.String, toolCalls: Schema.Array(ToolCall) }),
  Schema.Struct({
    role: Schema.Literal("tool"),
    toolCallId: Schema.String,
    name: Schema.String,
    content: Schema.String,
    /** The call failed: providers that mark failed results (Anthropic's `is_error`) can say so. */
    isError: Schema.optional(Schema.Boolean)
  })
)
export type Message = typeof Message.Type

/** What the kernel asks. Every assistant tool call in `messages` is followed by its result. */
export const Request = Schema.Struct({
  system: Schema.String,
  messages: Schema.Array(Message),
  tools: Schema.Array(Tool.Spec),
  /**
   * `text`: the answer is plain text (a summary), not an action: adapters send no tools, no JSON
   * action schema and no grammar. Absent for the requests that ask for the next action.
   */
  format: Schema.optional(Schema.Literal("text"))
})
export type Request = typeof Request.Type

/** Why the model stopped. `length` means the answer was cut off and is never executed; `content_filter` (behaviour 3 on) that the server withheld it, likewise never executed. */
export const FinishReason = Schema.Literal("stop", "tool_calls", "length", "content_filter", "other")
export type FinishReason = typeof FinishReason.Type

export const Usage = Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number })
export type Usage = typeof Usage.Type

/** The model's raw answer, recorded as is in `ModelResponded`. */
export const Response = Schema.Struct({
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  finishReason: FinishReason,
  usage: Usage,
  /** Set when the answer was longer than allowed and cut: its original length in characters. */
  oversize: Schema.optional(Schema.NonNegativeInt),
  /**
   * Set by adapters that asked for a JSON action in the text (JSON mode) rather than native tool
   * calls, so a rejection tells the model what was wrong in the form it was asked for.
   */
  format: Schema.optional(Schema.Literal("json_action"))
})
export type Response = typeof Response.Type

/** The model could not answer. `server` and `status` say where and how, when known. */
export class ModelError extends Schema.TaggedError<ModelError>()("@rx/kernel/ModelError", {
  message: Schema.String,
  server: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Number),
  /** No later attempt can succeed (the request itself is wrong); by default judged from `status` (`isPermanent`). */
  permanent: Schema.optional(Schema.Boolean)
}) {}

export interface Service {
  /** The next answer for a request; `ModelError` once the adapter's own retries are spent. */
  readonly generate: (request: Request) => Effect.Effect<Response, ModelError>
}

/**
 * Whether a model failure is one no later attempt can fix: the request itself was refused
 * (bad request, credentials, unknown model or route). Anything else (unreachable, timeouts,
 * rate limits, server errors) may pass, so a goal waits for it instead of ending.
 */
export const isPermanent = (status: number | undefined): boolean =>
  status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 409 && status !== 425 && status !== 429

export class LanguageModel extends Context.Tag("@rx/kernel/LanguageModel")<LanguageModel, Service>() {}

const noUsage: Usage = { inputTokens: 0, outputTokens: 0 }

/** An answer that calls one tool. */
export const callTool = (name: string, input: unknown, text = ""): Response => ({
  text,
  toolCalls: [{ id: "call_0", name, arguments: JSON.stringify(input) }],
  finishReason: "tool_calls",
  usage: noUsage
})

/** An answer that calls a tool with raw argument text (for malformed JSON). */
export const callToolRaw = (name: string, rawArguments: string): Response => ({
  text: "",
  toolCalls: [{ id: "call_0", name, arguments: rawArguments }],
  finishReason: "tool_calls",
  usage: noUsage
})

/** An answer of plain text. */
export const text = (content: string, finishReason: FinishReason = "stop"): Response => ({
  text: content,
  toolCalls: [],
  finishReason,
  usage: noUsage
})

/** An answer that ends the goal. */
export const done = (summary: string): Response => callTool("done", { summary })

/** One scripted step: a fixed answer, or an Effect computed from the request. */
export type Step = Response | ((request: Request, index: number) => Effect.Effect<Response, ModelError>)

/** A model that answers the n-th request with the n-th step, and fails once the script ends. */
export const makeScripted = (steps: ReadonlyArray<Step>) =>
  Effect.map(Ref.make(0), (counter) =>
    LanguageModel.of({
      generate: (request) =>
        Effect.flatMap(Ref.getAndUpdate(counter, (n) => n + 1), (index) => {
          const step = steps[index]
          if (step === undefined) {
            return Effect.fail(new ModelError({ message: "the scripted model has no further answer", permanent: true }))
          }
          return typeof step === "function" ? step(request, index) : Effect.succeed(step)
        })
    })
  )

/** A scripted model from a list of answers. */
export const layerScripted = (steps: ReadonlyArray<Step>): Layer.Layer<LanguageModel> =>
  Layer.effect(LanguageModel, makeScripted(steps))

/** A model whose n-th answer is `answer(request, n)`; it never runs out (benchmarks, long runs). */
export const layerFunction = (answer: (request: Request, index: number) => Response): Layer.Layer<LanguageModel> =>
  Layer.effect(
    LanguageModel,
    Effect.sync(() => {
      let index = 0
      return LanguageModel.of({ generate: (request) => Effect.sync(() => answer(request, index++)) })
    })
  )
