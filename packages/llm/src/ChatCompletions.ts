/**
 * The OpenAI Chat Completions wire format, as spoken by OpenAI, Ollama, llama.cpp server, vLLM
 * and LM Studio: Schemas of the request and response bodies, the request built from the
 * kernel's `Request` (and nothing else), and the mapping of the answer back to a `Response`.
 * Tool call arguments are passed through as raw text: the kernel decodes and validates them.
 */
import { Issues, JsonAction, LanguageModel, Tool } from "@rx/kernel"
import { Either, Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/** A tool call in an assistant message of the request. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function"),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})
export type ToolCall = typeof ToolCall.Type

export const SystemMessage = Schema.Struct({ role: Schema.Literal("system"), content: Schema.String })
export const UserMessage = Schema.Struct({ role: Schema.Literal("user"), content: Schema.String })
/** `content` is null when the message only calls tools. */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.NullOr(Schema.String),
  tool_calls: Schema.optional(Schema.Array(ToolCall))
})
export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  tool_call_id: Schema.String,
  content: Schema.String
})

export const Message = Schema.Union(SystemMessage, UserMessage, AssistantMessage, ToolMessage)
export type Message = typeof Message.Type

/** A tool offered to the model (native tool calls). */
export const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.String,
    description: Schema.String,
    parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })
})
export type FunctionTool = typeof FunctionTool.Type

/** Structured output: the answer must match `schema` (JSON-action mode). */
export const ResponseFormat = Schema.Struct({
  type: Schema.Literal("json_schema"),
  json_schema: Schema.Struct({
    name: Schema.String,
    strict: Schema.Boolean,
    schema: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })
})
export type ResponseFormat = typeof ResponseFormat.Type

/** The body of `POST {baseUrl}/chat/completions`. */
export const ChatRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(Message),
  tools: Schema.optional(Schema.Array(FunctionTool)),
  tool_choice: Schema.optional(Schema.Literal("auto")),
  parallel_tool_calls: Schema.optional(Schema.Boolean),
  response_format: Schema.optional(ResponseFormat),
  temperature: Schema.optional(Schema.Number),
  max_tokens: Schema.optional(Schema.Number),
  max_completion_tokens: Schema.optional(Schema.Number),
  stream: Schema.Boolean,
  /** With `stream`, asks for a last chunk with the token usage. */
  stream_options: Schema.optional(Schema.Struct({ include_usage: Schema.Boolean }))
})
export type ChatRequest = typeof ChatRequest.Type

// ---------------------------------------------------------------------------------------------
// Response (lenient where servers differ, strict where the kernel depends on it)
// ---------------------------------------------------------------------------------------------

/**
 * A tool call in the answer. Some servers omit `id` or `type`, and a few send `arguments` as
 * an object rather than JSON text; both are accepted and normalized, never interpreted.
 */
export const ResponseToolCall = Schema.Struct({
  id: Schema.optional(Schema.NullOr(Schema.String)),
  type: Schema.optional(Schema.NullOr(Schema.String)),
  function: Schema.Struct({
    name: Schema.String,
    arguments: Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  })
})
export type ResponseToolCall = typeof ResponseToolCall.Type

/**
 * A `tool_calls` entry as servers send it, valid or not: one with no usable `function` is the
 * model's mistake, handed to the kernel (which rejects that call alone), never a refused answer.
 */
export const ResponseToolCallEntry = Schema.Union(ResponseToolCall, Schema.Unknown)

export const ResponseMessage = Schema.Struct({
  role: Schema.optional(Schema.String),
  content: Schema.optional(Schema.NullOr(Schema.String)),
  tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ResponseToolCallEntry)))
})

export const Choice = Schema.Struct({
  index: Schema.optional(Schema.Number),
  message: ResponseMessage,
  finish_reason: Schema.optional(Schema.NullOr(Schema.String))
})

export const ResponseUsage = Schema.Struct({
  prompt_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  completion_tokens: Schema.optional(Schema.NullOr(Schema.Number))
})

/** The body of a successful answer. */
export const ChatResponse = Schema.Struct({
  id: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  choices: Schema.Array(Choice),
  usage: Schema.optional(Schema.NullOr(ResponseUsage))
})
export type ChatResponse = typeof ChatResponse.Type

/** Decode a response body (JSON text). */
export const decodeResponse = Schema.decodeUnknownEither(Schema.parseJson(ChatResponse), { errors: "all" })

const decodeChatResponse = Schema.decodeUnknownEither(ChatResponse, { errors: "all" })

/** Text on one line, at most `max` characters. */
const snippet = (text: string, max = 100): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max)}...` : line
}

/**
 * Read a non-streamed answer. `Left` says what came instead, as a clause whose subject is the
 * server ("answered HTML, not JSON ..."), on one line: an empty body, an HTML page (often a base
 * URL that is not the API root), text that is not JSON, an error, or JSON of another shape.
 */
export const readResponse = (body: string): Either.Either<ChatResponse, string> => {
  const text = body.trim()
  if (text === "") return Either.left("answered an empty body")
  if (text.startsWith("<")) return Either.left("answered HTML, not JSON (is the base URL the API root, e.g. .../v1?)")
  return Either.match(parseJsonText(text), {
    onLeft: () => Either.left(`answered text that is not JSON: ${snippet(text)}`),
    onRight: (json) =>
      Either.mapLeft(decodeChatResponse(json), (error) =>
        isErrorBody(json)
          ? `answered an error: ${errorMessage(text)}`
          : `answered JSON that is not a Chat Completions response: ${snippet(Issues.format(error), 300)}`)
  })
}

/** The error bodies servers send: OpenAI-style `{"error": {"message"}}`, and the variants. */
export const ErrorBody = Schema.Union(
  Schema.Struct({ error: Schema.Struct({ message: Schema.String }) }),
  Schema.Struct({ error: Schema.String }),
  Schema.Struct({ message: Schema.String }),
  Schema.Struct({ detail: Schema.String })
)

const decodeErrorBody = Schema.decodeUnknownEither(Schema.parseJson(ErrorBody))
const isErrorBody = Schema.is(ErrorBody)

/** The server's own explanation of an error, from its body: JSON if it is, else the text. */
export const errorMessage = (body: string): string => {
  const text = Either.match(decodeErrorBody(body), {
    onLeft: () => body.trim(),
    onRight: (decoded) =>
      "error" in decoded
        ? typeof decoded.error === "string" ? decoded.error : decoded.error.message
        : "message" in decoded
        ? decoded.message
        : decoded.detail
  })
  const oneLine = text.replace(/\s+/g, " ")
  return oneLine.length > 500 ? `${oneLine.slice(0, 500)}...` : oneLine === "" ? "(empty body)" : oneLine
}

// ---------------------------------------------------------------------------------------------
// Building the request
// ---------------------------------------------------------------------------------------------

/**
 * How the action is asked for. `tools`: native tool calls. `json`: no `tools`; the answer is
 * constrained by `response_format` to `{"tool", "input", "thought"?}`, which the kernel
 * decodes from the text.
 */
export const Mode = Schema.Literal("tools", "json")
export type Mode = typeof Mode.Type

/** What, beyond the kernel's request, shapes the body. */
export interface Options {
  readonly model: string
  readonly mode: Mode
  /** `false` asks for one call per answer; `"omit"` for servers that reject the field. */
  readonly parallelToolCalls: boolean | "omit"
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  /** OpenAI's reasoning models take `max_completion_tokens`; most servers take `max_tokens`. */
  readonly maxTokensParameter?: "max_tokens" | "max_completion_tokens" | undefined
  /** Ask for server-sent events, so the idle timeout applies between tokens. */
  readonly stream?: boolean | undefined
}

/**
 * Why a conversation is not valid for the API: an assistant tool call with no result, or a
 * result with no call. The kernel promises neither happens; this catches it before a server
 * rejects it with a vaguer message.
 */
export const conversationProblem = (messages: ReadonlyArray<LanguageModel.Message>): string | undefined => {
  let pending: Array<string> = []
  for (const [index, message] of messages.entries()) {
    if (message.role === "tool") {
      if (!pending.includes(message.toolCallId)) {
        return `message ${index} is the result of tool call "${message.toolCallId}", which the assistant message before it did not make`
      }
      pending = pending.filter((id) => id !== message.toolCallId)
      continue
    }
    if (pending.length > 0) {
      return `tool call "${pending[0]}" has no result before message ${index}`
    }
    if (message.role === "assistant") pending = message.toolCalls.map((call) => call.id)
  }
  return pending.length > 0 ? `tool call "${pending[0]}" has no result` : undefined
}

/** The JSON Schema of a JSON-mode answer: one action among the offered tools. */
export const actionSchema = (tools: ReadonlyArray<Tool.Spec>): Record<string, unknown> => {
  const names = tools.map((tool) => tool.name)
  const action = (tool: Record<string, unknown>, input: unknown) => ({
    type: "object",
    properties: { thought: { type: "string" }, tool, input },
    required: ["tool", "input"],
    additionalProperties: false
  })
  // One branch per tool constrains the input too; `$ref`s would not resolve inside a branch.
  if (tools.length > 0 && !tools.some((tool) => containsRef(tool.parameters))) {
    return { anyOf: tools.map((tool) => action({ type: "string", enum: [tool.name] }, tool.parameters)) }
  }
  return action(names.length > 0 ? { type: "string", enum: names } : { type: "string" }, { type: "object" })
}

const containsRef = (value: unknown): boolean =>
  Array.isArray(value)
    ? value.some(containsRef)
    : typeof value === "object" && value !== null
    ? Object.entries(value).some(([key, inner]) => key === "$ref" || containsRef(inner))
    : false

/** What JSON mode adds to the system prompt: the answer's form and the tools (not sent as `tools`). */
export const jsonModeInstructions = JsonAction.instructions

/** The messages of a JSON-mode request: no `tool` roles, consecutive same roles merged. */
const jsonMessages = (messages: ReadonlyArray<LanguageModel.Message>): Array<Message> =>
  JsonAction.turns(messages).map((turn) => turn.role === "user"
    ? { role: "user", content: turn.content }
    : { role: "assistant", content: turn.content })

/** The messages of a native-tools request, one for one. */
const toolMessages = (messages: ReadonlyArray<LanguageModel.Message>): Array<Message> =>
  messages.map((message): Message => {
    switch (message.role) {
      case "user":
        return { role: "user", content: message.content }
      case "assistant":
        return message.toolCalls.length === 0
          ? { role: "assistant", content: message.content }
          : {
            role: "assistant",
            content: message.content === "" ? null : message.content,
            tool_calls: message.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: call.arguments }
            }))
          }
      case "tool":
        return { role: "tool", tool_call_id: message.toolCallId, content: message.content }
    }
  })

/**
 * The request body for the kernel's request: deterministic, so the same State sends the same
 * bytes. `Left` when the conversation is not valid for the API.
 */
export const fromRequest = (options: Options, request: LanguageModel.Request): Either.Either<ChatRequest, string> => {
  const problem = conversationProblem(request.messages)
  if (problem !== undefined) return Either.left(`the conversation is not valid for the Chat Completions API: ${problem}`)
  // A plain-text request (a summary) is asked as such in either mode: no tools, no action schema.
  const json = options.mode === "json" && request.format !== "text"
  const system = json
    ? [request.system, jsonModeInstructions(request.tools)].filter((part) => part !== "").join("\n\n")
    : request.system
  const messages: Array<Message> = [
    ...(system === "" ? [] : [{ role: "system" as const, content: system }]),
    ...(json ? jsonMessages(request.messages) : toolMessages(request.messages))
  ]
  const offerTools = !json && request.tools.length > 0
  return Either.right({
    model: options.model,
    messages,
    ...(offerTools
      ? {
        tools: request.tools.map((tool) => ({
          type: "function" as const,
          function: { name: tool.name, description: tool.description, parameters: tool.parameters }
        })),
        tool_choice: "auto" as const,
        ...(options.parallelToolCalls === "omit" ? {} : { parallel_tool_calls: options.parallelToolCalls })
      }
      : {}),
    ...(json
      ? {
        response_format: {
          type: "json_schema" as const,
          json_schema: { name: "action", strict: false, schema: actionSchema(request.tools) }
        }
      }
      : {}),
    ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
    ...(options.maxTokens === undefined ? {} : { [options.maxTokensParameter ?? "max_tokens"]: options.maxTokens }),
    ...(options.stream === true ? { stream: true, stream_options: { include_usage: true } } : { stream: false })
  })
}

// ---------------------------------------------------------------------------------------------
// Mapping the answer
// ---------------------------------------------------------------------------------------------

/** The wire `finish_reason` as the kernel knows it; `length` stays `length`. */
export const finishReason = (reason: string | null | undefined): LanguageModel.FinishReason => {
  switch (reason) {
    case "stop":
    case "length":
    case "content_filter":
    case "tool_calls":
      return reason
    case "function_call":
      return "tool_calls"
    default:
      return "other"
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isResponseToolCall = Schema.is(ResponseToolCall)

/**
 * A `tool_calls` entry as the kernel's call. A call whose `function` is missing but whose name
 * and arguments stand beside `id` is read from there; an entry with no name at all becomes a
 * call with an empty name and the entry's JSON as its arguments, which the kernel rejects alone.
 */
const toolCall = (entry: unknown, index: number): LanguageModel.ToolCall => {
  const id = isRecord(entry) && typeof entry.id === "string" ? entry.id : `call_${index}`
  // A function whose arguments are null (a tool that takes none) keeps its name: its arguments read as none.
  const fn = isResponseToolCall(entry)
    ? entry.function
    : isRecord(entry) && isRecord(entry.function) && typeof entry.function.name === "string"
    ? entry.function
    : isRecord(entry) && typeof entry.name === "string"
    ? entry
    : undefined
  if (fn === undefined || typeof fn.name !== "string") return { id, name: "", arguments: JSON.stringify(entry) ?? "null" }
  const args = fn.arguments
  return { id, name: fn.name, arguments: typeof args === "string" ? args : args === undefined || args === null ? "" : JSON.stringify(args) }
}

/** The kernel's `Response` for a decoded answer (the first choice). `Left` when there is none. */
export const toResponse = (response: ChatResponse): Either.Either<LanguageModel.Response, string> => {
  const choice = response.choices[0]
  if (choice === undefined) return Either.left("the answer has no choices")
  const calls = choice.message.tool_calls ?? []
  return Either.right({
    text: choice.message.content ?? "",
    toolCalls: calls.map(toolCall),
    finishReason: finishReason(choice.finish_reason),
    usage: {
      inputTokens: response.usage?.prompt_tokens ?? 0,
      outputTokens: response.usage?.completion_tokens ?? 0
    }
  })
}

// ---------------------------------------------------------------------------------------------
// Streaming: server-sent events, assembled into one answer
// ---------------------------------------------------------------------------------------------

/** A fragment of a tool call; `index` says which call it continues. */
export const ChunkToolCall = Schema.Struct({
  index: Schema.optional(Schema.NullOr(Schema.Number)),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  type: Schema.optional(Schema.NullOr(Schema.String)),
  function: Schema.optional(Schema.NullOr(Schema.Struct({
    name: Schema.optional(Schema.NullOr(Schema.String)),
    arguments: Schema.optional(Schema.NullOr(Schema.String))
  })))
})

export const ChunkChoice = Schema.Struct({
  index: Schema.optional(Schema.Number),
  delta: Schema.optional(Schema.NullOr(Schema.Struct({
    content: Schema.optional(Schema.NullOr(Schema.String)),
    tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ChunkToolCall)))
  }))),
  finish_reason: Schema.optional(Schema.NullOr(Schema.String))
})

/** One `data:` event of a streamed answer. */
export const ChatChunk = Schema.Struct({
  choices: Schema.optional(Schema.NullOr(Schema.Array(ChunkChoice))),
  usage: Schema.optional(Schema.NullOr(ResponseUsage))
})

const decodeChunk = Schema.decodeUnknownEither(ChatChunk, { errors: "all" })
const ErrorEvent = Schema.Struct({ error: Schema.Unknown })
const isErrorEvent = Schema.is(ErrorEvent)

/**
 * Why an answer could not be read, as a clause whose subject is the server ("stopped the
 * answer before it was complete"); `dropped` means it ended early (worth a retry).
 */
export interface StreamProblem {
  readonly message: string
  readonly dropped: boolean
}

/**
 * A call's name from its chunks: most servers send it once, some again with every chunk (the
 * same, or the name so far), a few in pieces; each is read as what it is, never doubled.
 */
const joinName = (sofar: string, fragment: string): string =>
  fragment === "" || fragment === sofar ? sofar : sofar === "" || fragment.startsWith(sofar) ? fragment : sofar + fragment

/** A streamed answer being assembled, one `data:` event at a time. */
export interface Assembler {
  /** Take the payload of one `data:` line; a problem ends the answer (nothing later can mend it). */
  readonly data: (payload: string) => Either.Either<void, StreamProblem>
  /** Whether `[DONE]` came: the answer is complete, whatever follows. */
  readonly done: () => boolean
  /** The answer once the events are over; a stream with neither `[DONE]` nor a finish reason was cut short. */
  readonly result: () => Either.Either<ChatResponse, StreamProblem>
}

/**
 * Assemble a streamed answer event by event: text deltas concatenated, tool call fragments
 * joined by `index`, the last finish reason and usage kept. It holds the answer, never the
 * events, so a long stream costs what its answer costs.
 */
export const assembler = (): Assembler => {
  let text = ""
  let sawText = false
  let finish: string | undefined
  let usage: typeof ResponseUsage.Type | undefined
  let done = false
  const calls: Array<{ id: string | undefined; name: string; arguments: string }> = []
  const data = (payload: string): Either.Either<void, StreamProblem> => {
    if (payload === "") return Either.void
    if (payload === "[DONE]") {
      done = true
      return Either.void
    }
    const parsed = parseJsonText(payload)
    if (Either.isLeft(parsed)) return Either.left({ message: `sent an event that is not JSON: ${payload.slice(0, 200)}`, dropped: false })
    if (isErrorEvent(parsed.right)) {
      return Either.left({ message: `reported an error in the middle of the answer: ${errorMessage(payload)}`, dropped: false })
    }
    const chunk = decodeChunk(parsed.right)
    if (Either.isLeft(chunk)) {
      return Either.left({
        message: `sent an event that is not a Chat Completions chunk: ${Issues.format(chunk.left)}`,
        dropped: false
      })
    }
    if (chunk.right.usage != null) usage = chunk.right.usage
    for (const choice of chunk.right.choices ?? []) {
      if ((choice.index ?? 0) !== 0) continue
      if (choice.finish_reason != null) finish = choice.finish_reason
      const delta = choice.delta
      if (delta == null) continue
      if (delta.content != null) {
        text += delta.content
        sawText = true
      }
      for (const [position, fragment] of (delta.tool_calls ?? []).entries()) {
        const index = fragment.index ?? position
        const call = calls[index] ?? { id: undefined, name: "", arguments: "" }
        calls[index] = {
          // The first non-empty id stands: some servers send "" or a new id with every chunk.
          id: call.id === undefined || call.id === "" ? (fragment.id ?? call.id) : call.id,
          name: joinName(call.name, fragment.function?.name ?? ""),
          arguments: call.arguments + (fragment.function?.arguments ?? "")
        }
      }
    }
    return Either.void
  }
  const result = (): Either.Either<ChatResponse, StreamProblem> => {
    if (!done && finish === undefined) return Either.left({ message: "stopped the answer before it was complete", dropped: true })
    const toolCalls = calls.filter((call) => call !== undefined).map((call) => ({
      ...(call.id === undefined ? {} : { id: call.id }),
      type: "function",
      function: { name: call.name, arguments: call.arguments }
    }))
    return Either.right({
      choices: [{
        index: 0,
        message: { role: "assistant", content: sawText ? text : null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
        finish_reason: finish ?? null
      }],
      ...(usage === undefined ? {} : { usage })
    })
  }
  return { data, done: () => done, result }
}

/**
 * Whether a body that starts with `head` (its first lines) and has no `data:` line so far is not
 * a stream at all (an HTML page, an error, a plain answer from a server that does not stream),
 * to be read as one answer.
 */
export const notAStream = (head: string): boolean => /^\s*[<{]/.test(head)

/**
 * Assemble a streamed answer given whole (a `text/event-stream` body) into a `ChatResponse`;
 * a body that is not a stream is read as one answer.
 */
export const assembleStream = (body: string): Either.Either<ChatResponse, StreamProblem> => {
  if (notAStream(body) && !/^data:/m.test(body)) return Either.mapLeft(readResponse(body), (message) => ({ message, dropped: false }))
  const assembly = assembler()
  for (const rawLine of body.split(/\r?\n/)) {
    if (!rawLine.startsWith("data:")) continue
    const fed = assembly.data(rawLine.slice(5).trim())
    if (Either.isLeft(fed)) return Either.left(fed.left)
  }
  return assembly.result()
}

const parseJsonText = Schema.decodeUnknownEither(Schema.parseJson())
