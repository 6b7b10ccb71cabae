/**
 * The kernel's `LanguageModel` over an OpenAI-compatible Chat Completions server (OpenAI,
 * Ollama, llama.cpp server, vLLM, LM Studio). One request per `generate`, with a total and an
 * idle timeout, and retries with backoff on 429, 5xx and connection errors.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Decode, Issues, LanguageModel } from "@rx/kernel"
import { Duration, Effect, Either, Encoding, Layer, Redacted, Schema } from "effect"
import * as ChatCompletions from "./ChatCompletions.js"
import * as Attempt from "./internal/attempt.js"
import * as Retrying from "./internal/retrying.js"
import * as Sse from "./internal/sse.js"
import * as Retry from "./Retry.js"

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** Whether `text` is an absolute `http:` or `https:` URL, with no surrounding spaces. */
const isHttpUrl = (text: string): boolean =>
  text === text.trim() && Either.match(Either.try(() => new URL(text)), {
    onLeft: () => false,
    onRight: (url) => url.protocol === "http:" || url.protocol === "https:"
  })

const shown = (text: string): string => JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}...` : text)

/** The API root: an absolute http(s) URL. */
const BaseUrl = Schema.String.pipe(
  Schema.filter((text) =>
    isHttpUrl(text) || `expected an http:// or https:// URL such as http://127.0.0.1:11434/v1, got ${shown(text)}`
  )
)

/** A model name: not empty, no surrounding spaces. */
const ModelName = Schema.String.pipe(
  Schema.filter((text) =>
    text.trim() === "" ? "must not be empty" : text !== text.trim() ? `must not start or end with spaces, got ${shown(text)}` : true
  )
)

/** How to reach the server and how patient to be with it. */
export const Config = Schema.Struct({
  /** The API root, ending in `/v1` for most servers, e.g. `http://127.0.0.1:11434/v1`. */
  baseUrl: BaseUrl,
  model: ModelName,
  /** Sent as `Authorization: Bearer`; local servers need none. */
  apiKey: Schema.optional(Schema.Redacted(Schema.String)),
  /** `tools` (native tool calls, the default) or `json` (a JSON action in the text). */
  mode: Schema.optionalWith(ChatCompletions.Mode, { default: () => "tools" }),
  /** `parallel_tool_calls` in tools mode; `"omit"` for servers that reject the field. */
  parallelToolCalls: Schema.optionalWith(Schema.Union(Schema.Boolean, Schema.Literal("omit")), {
    default: () => false
  }),
  temperature: Schema.optional(Schema.Number),
  /** `max_tokens`; an answer cut off by it ends as `finishReason: "length"`, never executed. */
  maxTokens: Schema.optional(PositiveInt),
  /** The field `maxTokens` is sent as: OpenAI's reasoning models need `max_completion_tokens`. */
  maxTokensParameter: Schema.optionalWith(Schema.Literal("max_tokens", "max_completion_tokens"), {
    default: () => "max_tokens"
  }),
  /**
   * Stream the answer (server-sent events), so the idle timeout applies between tokens rather
   * than to the whole generation. Off by default: a few servers stream tool calls badly.
   */
  stream: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Extra request headers (an organization, a proxy's key). */
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** The whole `generate`, all attempts and waits included. */
  timeoutMs: Schema.optionalWith(PositiveInt, { default: () => 600_000 }),
  /** The longest silence in one attempt: before the answer starts, or inside it. */
  idleTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 300_000 }),
  /**
   * Bytes of an answer read at most; a longer one is not read further and reaches the kernel as
   * an oversized answer (`Response.oversize`), which it rejects with a reason the model sees.
   */
  maxResponseBytes: Schema.optionalWith(PositiveInt, { default: () => 8 * 1024 * 1024 }),
  retry: Schema.optionalWith(Retry.Policy, { default: () => Retry.defaultPolicy })
})
export type Config = typeof Config.Type

/** What `layer` takes: a `Config` where the defaulted fields may be left out. */
export type Input = Schema.Struct.Constructor<typeof Config.fields>

/** The configuration does not make sense; the message says what is wrong with each field, on one line. */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("@rx/llm/InvalidConfig", {
  message: Schema.String
}) {}

const validateConfig = Decode.validated(Config, (problems) => new InvalidConfig({ message: `invalid model configuration: ${problems}` }))

/** Check an input and fill in the defaults. */
export const config = (input: Input): Effect.Effect<Config, InvalidConfig> =>
  validateConfig(Config.make(input, { disableValidation: true }))

const trimSlashes = (url: string) => url.replace(/\/+$/, "")

/** The server that usually listens on a local URL's port, to name it when it cannot be reached. */
export const likelyServer = (url: string): string => {
  const match = /^https?:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)(?:\/|$)/.exec(url)
  const byPort: Record<string, string> = { "11434": "Ollama", "8080": "the llama.cpp server", "8000": "vLLM", "1234": "LM Studio" }
  return (match?.[1] === undefined ? undefined : byPort[match[1]]) ?? "the model server"
}

/** Why an attempt failed, in words a user can act on. */
const describe = (server: string, config: Config, error: Attempt.AttemptError): string => {
  switch (error._tag) {
    case "Transport":
      return error.refused
        ? `cannot reach ${server}: is ${likelyServer(server)} running? (pass --base-url) [${error.detail}]`
        : `the connection to ${server} failed: ${error.detail}`
    case "Idle":
      return `${server} sent nothing for ${config.idleTimeoutMs} ms (idle timeout, ${
        error.phase === "headers" ? "waiting for the answer to start" : "in the middle of the answer"
      })`
    case "Status": {
      const hint = error.status === 401 || error.status === 403
        ? " (check the API key: --api-key or RX_API_KEY)"
        : error.status === 404
        ? ` (check the model name "${config.model}", and that the base URL ends in /v1)`
        : ""
      return `${server} answered HTTP ${error.status}: ${ChatCompletions.errorMessage(error.body)}${hint}`
    }
  }
}

/** An attempt's failure, classified for the retry loop. */
const classify = (server: string, config: Config, error: Attempt.AttemptError): Retrying.Failure => ({
  message: describe(server, config, error),
  retryable: Attempt.retryable(error),
  ...(error._tag === "Status" ? { status: error.status, headers: error.headers } : {})
})

/** One attempt's answer: what was read from it, or only its size when it passed the cap. */
type Read =
  | { readonly status: number; readonly oversize: number }
  | { readonly status: number; readonly decoded: Either.Either<ChatCompletions.ChatResponse, ChatCompletions.StreamProblem> }

/** An answer too large to read: the kernel rejects it as `too_large` and tells the model. */
export const oversized = (bytes: number): LanguageModel.Response => ({
  text: "",
  toolCalls: [],
  finishReason: "length",
  usage: { inputTokens: 0, outputTokens: 0 },
  oversize: bytes
})

/**
 * What the current span (the kernel's model call span, `chat`, when a tracer is provided) is
 * told of a request, in the OpenTelemetry GenAI conventions. The provider is `openai`: the API
 * spoken, whichever server answers it.
 */
const requestAttributes = (config: Config, server: string): Record<string, unknown> => {
  const url = new URL(server)
  const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
  return {
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": config.model,
    "server.address": url.hostname,
    "server.port": port,
    ...(config.temperature === undefined ? {} : { "gen_ai.request.temperature": config.temperature }),
    ...(config.maxTokens === undefined ? {} : { "gen_ai.request.max_tokens": config.maxTokens })
  }
}

/** The answer's own model name and id, when the server sent them. */
const responseAttributes = (response: ChatCompletions.ChatResponse): Record<string, unknown> => ({
  ...(response.model === undefined ? {} : { "gen_ai.response.model": response.model }),
  ...(response.id === undefined ? {} : { "gen_ai.response.id": response.id })
})

/**
 * A base URL's user and password (`https://user:pass@host/v1`) taken out: the URL without them is
 * what requests go to and what messages, errors and traces name; they go as Basic credentials
 * (an API key, when set, is sent instead).
 */
const credentialsOf = (baseUrl: string): { readonly server: string; readonly basic: string | undefined } => {
  const found = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i.exec(baseUrl)
  if (found === null) return { server: baseUrl, basic: undefined }
  const userinfo = found[2] ?? ""
  const colon = userinfo.indexOf(":")
  const decode = (text: string) => Either.getOrElse(Either.try(() => decodeURIComponent(text)), () => text)
  const [user, password] = colon < 0 ? [userinfo, ""] : [userinfo.slice(0, colon), userinfo.slice(colon + 1)]
  return { server: baseUrl.replace(found[0], found[1] ?? ""), basic: Encoding.encodeBase64(`${decode(user)}:${decode(password)}`) }
}

/** A `LanguageModel` that speaks Chat Completions through the `HttpClient` in context. */
export const make = (input: Input): Effect.Effect<LanguageModel.LanguageModel["Type"], InvalidConfig, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const cfg = yield* config(input)
    const client = yield* HttpClient.HttpClient
    const { basic, server } = credentialsOf(trimSlashes(cfg.baseUrl))
    const url = `${server}/chat/completions`
    const idle = Duration.millis(cfg.idleTimeoutMs)
    const settings: Retrying.Settings = { server, policy: cfg.retry, timeoutMs: cfg.timeoutMs }
    const requested = requestAttributes(cfg, server)
    const options: ChatCompletions.Options = {
      model: cfg.model,
      mode: cfg.mode,
      parallelToolCalls: cfg.parallelToolCalls,
      temperature: cfg.temperature,
      maxTokens: cfg.maxTokens,
      maxTokensParameter: cfg.maxTokensParameter,
      stream: cfg.stream
    }
    const base = HttpClientRequest.post(url).pipe(
      HttpClientRequest.setHeader("accept", cfg.stream ? "text/event-stream" : "application/json"),
      HttpClientRequest.setHeaders(cfg.headers ?? {}),
      (request) =>
        cfg.apiKey !== undefined
          ? HttpClientRequest.bearerToken(request, Redacted.value(cfg.apiKey))
          : basic === undefined
          ? request
          : HttpClientRequest.setHeader(request, "authorization", `Basic ${basic}`)
    )
    /** The request could not be built or encoded: no later attempt would do better. */
    const fail = (message: string) => Effect.fail(new LanguageModel.ModelError({ message, server, permanent: true }))
    /** A 2xx answer that is not usable is the server's fault, and not retried. */
    const unusable = (status: number, message: string): Retrying.Failure => ({ message, status, retryable: false })

    /** A body read whole, as one answer. */
    const whole = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<Read, Attempt.AttemptError> =>
      Effect.map(Attempt.attempt(client, request, idle, cfg.maxResponseBytes), (answer) =>
        answer.oversize !== undefined
          ? { status: answer.status, oversize: answer.oversize }
          : { status: answer.status, decoded: Either.mapLeft(ChatCompletions.readResponse(answer.body), (message) => ({ message, dropped: false })) })

    /**
     * A streamed answer, assembled event by event as the body arrives; reading stops at `[DONE]`
     * or at an event that spoils the answer. A body that turns out not to be a stream (its first
     * text `<` or `{`, no `data:` line) is read as one answer, as `assembleStream` reads it.
     */
    const streamed = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<Read, Attempt.AttemptError> =>
      Effect.suspend(() => {
        const assembly = ChatCompletions.assembler()
        // The lines before the first event, kept only while the body may be a plain answer.
        let plain: Array<string> | undefined = []
        let blank = true
        let problem: ChatCompletions.StreamProblem | undefined
        const line = (text: string): boolean => {
          const payload = Sse.data(text)
          if (payload === undefined) {
            if (plain !== undefined && blank && text.trim() !== "") {
              blank = false
              if (!ChatCompletions.notAStream(text)) plain = undefined
            }
            plain?.push(text)
            return false
          }
          plain = undefined
          const fed = assembly.data(payload)
          if (Either.isLeft(fed)) {
            problem = fed.left
            return true
          }
          return assembly.done()
        }
        return Effect.map(Attempt.attemptLines(client, request, idle, cfg.maxResponseBytes, line), (lines): Read => {
          if (lines.oversize !== undefined) return { status: lines.status, oversize: lines.oversize }
          if (problem !== undefined) return { status: lines.status, decoded: Either.left(problem) }
          if (plain !== undefined && !blank) {
            return { status: lines.status, decoded: Either.mapLeft(ChatCompletions.readResponse(plain.join("\n")), (message) => ({ message, dropped: false })) }
          }
          return { status: lines.status, decoded: assembly.result() }
        })
      })

    const generate = (request: LanguageModel.Request): Effect.Effect<LanguageModel.Response, LanguageModel.ModelError> =>
      Effect.gen(function*() {
        yield* Effect.annotateCurrentSpan(requested)
        const body = yield* Either.match(ChatCompletions.fromRequest(options, request), {
          onLeft: fail,
          onRight: Effect.succeed
        })
        const encoded = yield* Schema.encode(ChatCompletions.ChatRequest)(body).pipe(
          Effect.catchAll((error) => fail(`cannot encode the request: ${Issues.format(error)}`))
        )
        const httpRequest = HttpClientRequest.bodyText(base, JSON.stringify(encoded), "application/json")
        const once = (cfg.stream ? streamed : whole)(httpRequest).pipe(
          Effect.mapError((error) => classify(server, cfg, error)),
          Effect.flatMap((answer) =>
            "oversize" in answer ? Effect.succeed(oversized(answer.oversize)) : Either.match(answer.decoded, {
              onLeft: (problem) =>
                Effect.fail(
                  problem.dropped
                    ? { message: `${server} ${problem.message}`, retryable: true }
                    : unusable(answer.status, `${server} ${problem.message}`)
                ),
              onRight: (decoded) =>
                Either.match(ChatCompletions.toResponse(decoded), {
                  onLeft: (problem) => Effect.fail(unusable(answer.status, `${server} sent an unusable answer: ${problem}`)),
                  onRight: (response) =>
                    Effect.as(
                      Effect.annotateCurrentSpan(responseAttributes(decoded)),
                      cfg.mode === "json" ? { ...response, format: "json_action" as const } : response
                    )
                })
            })
          )
        )
        return yield* Retrying.run(settings, once)
      })

    return LanguageModel.LanguageModel.of({ generate })
  })

/** The model as a Layer; provide an `HttpClient` (e.g. `NodeHttpClient.layerUndici`). */
export const layer = (input: Input): Layer.Layer<LanguageModel.LanguageModel, InvalidConfig, HttpClient.HttpClient> =>
  Layer.effect(LanguageModel.LanguageModel, make(input))

/** The model as a Layer with Node's HTTP client (undici) included. */
export const layerNode = (input: Input): Layer.Layer<LanguageModel.LanguageModel, InvalidConfig> =>
  Layer.provide(layer(input), NodeHttpClient.layerUndici)
