/**
 * The kernel's `LanguageModel` over @effect/ai's `LanguageModel` service, so any @effect/ai
 * provider (Anthropic, OpenAI Responses, ...) drives rx unchanged. Tools are offered with the
 * kernel's own JSON Schemas; rx resolves tool calls itself, so @effect/ai never runs one.
 * The same retry policy and total timeout as the Chat Completions adapter apply.
 */
import { AiError, LanguageModel as AiLanguageModel, Prompt, Tool as AiTool } from "@effect/ai"
import type { Toolkit } from "@effect/ai"
import { LanguageModel, Tool } from "@rx/kernel"
import { Effect, Either, Layer, Schema } from "effect"
import * as ChatCompletions from "./ChatCompletions.js"
import * as Attempt from "./internal/attempt.js"
import * as Retrying from "./internal/retrying.js"
import * as Retry from "./Retry.js"

/** How the bridge names the provider in errors, and how patient it is. */
export interface Options {
  /** Names the provider in every `ModelError`, e.g. `"anthropic"`. */
  readonly server?: string | undefined
  readonly retry?: Retry.Policy | undefined
  /** The whole `generate`, all attempts and waits included. */
  readonly timeoutMs?: number | undefined
}

/**
 * Tool parameters as an open object: the provider gets the kernel's JSON Schema verbatim
 * (the `jsonSchema` annotation), and the arguments it returns keep every key, so the kernel
 * sees them as the model sent them.
 */
const openParameters = (spec: Tool.Spec) =>
  Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
    jsonSchema: spec.parameters
  })

/** The kernel's tool specs as an @effect/ai toolkit whose calls are never resolved here. */
const toolkitOf = (specs: ReadonlyArray<Tool.Spec>): Toolkit.WithHandler<Record<string, AiTool.Any>> => ({
  tools: Object.fromEntries(
    specs.map((spec) => [spec.name, AiTool.make(spec.name, { description: spec.description }).setParameters(openParameters(spec))])
  ),
  handle: (name) => Effect.dieMessage(`rx resolves tool calls itself; @effect/ai was asked to run ${String(name)}`)
})

const parseJson = Schema.decodeUnknownEither(Schema.parseJson())

/** Earlier arguments as the object providers require; text that is not an object is wrapped. */
const argumentsObject = (raw: string): unknown =>
  Either.match(parseJson(raw), {
    onLeft: () => ({ invalid_arguments: raw }),
    onRight: (value) => typeof value === "object" && value !== null && !Array.isArray(value) ? value : { invalid_arguments: raw }
  })

/** A tool result as the provider will re-encode it (most `JSON.stringify` it). */
const resultValue = (content: string): unknown => Either.getOrElse(parseJson(content), () => content)

/** The kernel's conversation as an @effect/ai prompt. */
export const toPrompt = (request: LanguageModel.Request): Prompt.Prompt =>
  Prompt.make([
    ...(request.system === "" ? [] : [{ role: "system" as const, content: request.system }]),
    ...request.messages.map((message): Prompt.MessageEncoded => {
      switch (message.role) {
        case "user":
          return { role: "user", content: message.content }
        case "assistant":
          return {
            role: "assistant",
            content: [
              ...(message.content === "" ? [] : [{ type: "text" as const, text: message.content }]),
              ...message.toolCalls.map((call) => ({
                type: "tool-call" as const,
                id: call.id,
                name: call.name,
                params: argumentsObject(call.arguments),
                providerExecuted: false
              }))
            ]
          }
        case "tool":
          return {
            role: "tool",
            content: [{
              type: "tool-result",
              id: message.toolCallId,
              name: message.name,
              isFailure: message.isError === true,
              result: resultValue(message.content),
              providerExecuted: false
            }]
          }
      }
    })
  ])

/** @effect/ai's finish reason as the kernel knows it; `length` stays `length`. */
export const finishReason = (reason: string): LanguageModel.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool-calls":
      return "tool_calls"
    case "content-filter":
      return "content_filter"
    default:
      return "other"
  }
}

/** An @effect/ai error, classified for the retry loop. */
const classify = (server: string, error: AiError.AiError): Retrying.Failure => {
  switch (error._tag) {
    case "HttpRequestError": {
      const { detail, refused } = Attempt.describeCause(error.cause)
      const where = `${error.request.method} ${error.request.url}`
      return {
        message: refused
          ? `cannot reach ${server} (${where}): is the address right and the network up? [${detail}]`
          : `the request to ${server} (${where}) failed: ${error.reason}${detail === "" ? "" : `: ${detail}`}`,
        retryable: error.reason === "Transport"
      }
    }
    case "HttpResponseError": {
      const status = error.response.status
      const detail = error.body === undefined ? error.message : ChatCompletions.errorMessage(error.body)
      return {
        message: `${server} answered HTTP ${status}: ${detail}`,
        status,
        retryable: error.reason === "StatusCode" && Retry.isRetryableStatus(status),
        headers: Object.fromEntries(Object.entries(error.response.headers).map(([key, value]) => [key.toLowerCase(), value]))
      }
    }
    default:
      return { message: `${server}: ${error.message}`, retryable: false }
  }
}

/** A kernel `LanguageModel` that asks the @effect/ai `LanguageModel` in context. */
export const make = (options: Options = {}): Effect.Effect<LanguageModel.LanguageModel["Type"], never, AiLanguageModel.LanguageModel> =>
  Effect.gen(function*() {
    const ai = yield* AiLanguageModel.LanguageModel
    const settings: Retrying.Settings = {
      server: options.server ?? "the @effect/ai model",
      policy: options.retry ?? Retry.defaultPolicy,
      timeoutMs: options.timeoutMs ?? 600_000
    }
    const generate = (request: LanguageModel.Request): Effect.Effect<LanguageModel.Response, LanguageModel.ModelError> => {
      const prompt = toPrompt(request)
      const toolkit = toolkitOf(request.tools)
      const once = ai.generateText({ prompt, toolkit, disableToolCallResolution: true }).pipe(
        Effect.mapError((error) => classify(settings.server, error)),
        Effect.map((response): LanguageModel.Response => ({
          text: response.text,
          toolCalls: response.toolCalls.map((call) => ({
            id: call.id,
            name: call.name,
            arguments: JSON.stringify(call.params)
          })),
          finishReason: finishReason(response.finishReason),
          usage: { inputTokens: response.usage.inputTokens ?? 0, outputTokens: response.usage.outputTokens ?? 0 }
        }))
      )
      return Retrying.run(settings, once)
    }
    return LanguageModel.LanguageModel.of({ generate })
  })

/** The bridge as a Layer; provide an @effect/ai `LanguageModel` (e.g. `AnthropicLanguageModel.layer`). */
export const layer = (options: Options = {}): Layer.Layer<LanguageModel.LanguageModel, never, AiLanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, make(options))
