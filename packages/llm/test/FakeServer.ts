/**
 * A fake Chat Completions server on 127.0.0.1 (a real node:http server on a free port),
 * scripted per request. It checks every request the way real servers do (each assistant tool
 * call answered by its tool result, no `tool` messages without `tools`, ...) and answers 400
 * when a request is not valid, recording why.
 */
import { Effect, Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** One scripted answer. */
export type Reply =
  | { readonly kind: "json"; readonly status?: number; readonly body: unknown; readonly headers?: Record<string, string> }
  | { readonly kind: "text"; readonly status: number; readonly body: string; readonly headers?: Record<string, string> }
  /** Never answer. */
  | { readonly kind: "stall" }
  /** Send the headers, then nothing. */
  | { readonly kind: "stallBody" }
  /** Send the headers, then one byte every `everyMs`, forever. */
  | { readonly kind: "dribble"; readonly everyMs: number }
  /** Close the connection without answering. */
  | { readonly kind: "drop" }
  /**
   * Server-sent events, one `data:` line each, `everyMs` apart; after `stallAfter` events go
   * silent, after `dropAfter` events close the connection.
   */
  | {
    readonly kind: "sse"
    readonly events: ReadonlyArray<unknown>
    readonly everyMs?: number
    readonly stallAfter?: number
    readonly dropAfter?: number
  }

export type Step = Reply | ((body: unknown, index: number) => Reply)

export interface Received {
  readonly index: number
  readonly at: number
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: unknown
  /** Why the request is not valid for the API, if it is not. */
  readonly invalid: string | undefined
}

export interface FakeServer {
  /** The base URL, ending in `/v1`. */
  readonly baseUrl: string
  /** `http://127.0.0.1:<port>`, for clients that add `/v1` themselves. */
  readonly origin: string
  readonly received: ReadonlyArray<Received>
  /** Resolves once `count` requests have arrived. */
  readonly waitFor: (count: number) => Effect.Effect<void>
}

type Json = { readonly [key: string]: unknown }
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

/** The checks real Chat Completions servers make, short of knowing the model. */
export const validate = (body: unknown): string | undefined => {
  if (!isObject(body)) return "the body is not a JSON object"
  if (typeof body.model !== "string" || body.model === "") return "missing model"
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages must be a non-empty array"
  const tools = body.tools
  if (tools !== undefined) {
    if (!Array.isArray(tools) || tools.length === 0) return "tools must be a non-empty array"
    for (const tool of tools) {
      if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) return "invalid tool"
      if (typeof tool.function.name !== "string" || !isObject(tool.function.parameters)) return "invalid tool function"
    }
  }
  if (body.parallel_tool_calls !== undefined && tools === undefined) {
    return "parallel_tool_calls is only allowed when 'tools' are specified"
  }
  if (body.response_format !== undefined) {
    const format = body.response_format
    if (!isObject(format) || format.type !== "json_schema" || !isObject(format.json_schema)) return "invalid response_format"
    if (typeof format.json_schema.name !== "string" || !isObject(format.json_schema.schema)) return "invalid json_schema"
  }
  let pending: Array<string> = []
  for (const [index, message] of body.messages.entries()) {
    if (!isObject(message)) return `messages[${index}] is not an object`
    const role = message.role
    if (role === "tool") {
      if (tools === undefined) return `messages[${index}]: a tool message needs tools`
      if (typeof message.tool_call_id !== "string" || !pending.includes(message.tool_call_id)) {
        return `messages[${index}]: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'`
      }
      if (typeof message.content !== "string") return `messages[${index}]: content must be a string`
      pending = pending.filter((id) => id !== message.tool_call_id)
      continue
    }
    if (pending.length > 0) {
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${
        pending.join(", ")
      }`
    }
    if (role === "system" || role === "user") {
      if (typeof message.content !== "string") return `messages[${index}]: content must be a string`
    } else if (role === "assistant") {
      const calls = message.tool_calls
      if (calls !== undefined) {
        if (!Array.isArray(calls) || calls.length === 0) return `messages[${index}]: tool_calls must be a non-empty array`
        for (const call of calls) {
          if (!isObject(call) || typeof call.id !== "string" || call.type !== "function" || !isObject(call.function)) {
            return `messages[${index}]: invalid tool call`
          }
          if (typeof call.function.arguments !== "string") return `messages[${index}]: arguments must be a string`
          pending.push(call.id)
        }
        if (message.content !== null && typeof message.content !== "string") return `messages[${index}]: bad content`
      } else if (typeof message.content !== "string") {
        return `messages[${index}]: content must be a string`
      }
    } else {
      return `messages[${index}]: unknown role ${String(role)}`
    }
  }
  if (pending.length > 0) return `tool calls without results: ${pending.join(", ")}`
  return undefined
}

/** What the server expects: the request path and the wire format's rules. */
export interface Dialect {
  readonly path: string
  readonly validate: (body: unknown) => string | undefined
}

export const chatCompletions: Dialect = { path: "/v1/chat/completions", validate }

/**
 * The rules of Anthropic's Messages API that a conversation with tools must keep: roles
 * alternate, starting with `user`; every `tool_use` is answered by a `tool_result` at the start
 * of the next user message.
 */
export const validateAnthropic = (body: unknown): string | undefined => {
  if (!isObject(body)) return "the body is not a JSON object"
  if (typeof body.model !== "string" || typeof body.max_tokens !== "number") return "model and max_tokens are required"
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages: at least one message is required"
  let pending: Array<string> = []
  let expected = "user"
  for (const [index, message] of body.messages.entries()) {
    if (!isObject(message)) return `messages.${index}: not an object`
    if (message.role !== expected) return `messages.${index}: roles must alternate between "user" and "assistant"`
    expected = expected === "user" ? "assistant" : "user"
    const content = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content
    if (!Array.isArray(content)) return `messages.${index}: content must be a string or an array`
    const results = content.filter((block) => isObject(block) && block.type === "tool_result")
      .map((block) => (block as Json).tool_use_id)
    for (const id of pending) {
      if (!results.includes(id)) {
        return `messages.${index}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${id}`
      }
    }
    if (message.role === "user" && results.some((id) => !pending.includes(String(id)))) {
      return `messages.${index}: unexpected \`tool_use_id\` found in \`tool_result\` blocks`
    }
    pending = message.role === "assistant"
      ? content.filter((block) => isObject(block) && block.type === "tool_use").map((block) => String((block as Json).id))
      : []
  }
  if (pending.length > 0) return `tool_use without tool_result: ${pending.join(", ")}`
  return undefined
}

export const anthropic: Dialect = { path: "/v1/messages", validate: validateAnthropic }

/** Start a server for the scope's lifetime. */
export const make = (steps: ReadonlyArray<Step>, dialect: Dialect = chatCompletions): Effect.Effect<FakeServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received: Array<Received> = []
    const waiters: Array<{ count: number; resume: () => void }> = []
    const timers = new Set<ReturnType<typeof setInterval> | ReturnType<typeof setTimeout>>()
    const notify = () => {
      for (const waiter of [...waiters]) {
        if (received.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1)
          waiter.resume()
        }
      }
    }
    const answer = (res: Http.ServerResponse, reply: Reply) => {
      switch (reply.kind) {
        case "json":
          res.writeHead(reply.status ?? 200, { "content-type": "application/json", ...reply.headers })
          res.end(JSON.stringify(reply.body))
          return
        case "text":
          res.writeHead(reply.status, { "content-type": "text/plain", ...reply.headers })
          res.end(reply.body)
          return
        case "stall":
          return
        case "stallBody":
          res.writeHead(200, { "content-type": "application/json" })
          res.flushHeaders()
          res.write(" ")
          return
        case "dribble": {
          res.writeHead(200, { "content-type": "application/json" })
          res.flushHeaders()
          const timer = setInterval(() => res.write(" "), reply.everyMs)
          timers.add(timer)
          res.on("close", () => {
            clearInterval(timer)
            timers.delete(timer)
          })
          return
        }
        case "drop":
          res.socket?.destroy()
          return
        case "sse": {
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
          res.flushHeaders()
          let sent = 0
          const next = () => {
            if (res.destroyed) return
            if (reply.dropAfter !== undefined && sent >= reply.dropAfter) return res.socket?.destroy()
            if (reply.stallAfter !== undefined && sent >= reply.stallAfter) return
            const event = reply.events[sent]
            if (event === undefined) return res.end()
            res.write(`data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`)
            sent++
            const timer = setTimeout(next, reply.everyMs ?? 0)
            timers.add(timer)
          }
          next()
          return
        }
      }
    }
    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let body: unknown
        try {
          body = JSON.parse(text)
        } catch {
          body = text
        }
        const index = received.length
        const path = (req.url ?? "").split("?")[0] ?? ""
        const invalid = path !== dialect.path || req.method !== "POST"
          ? `unexpected ${req.method} ${path}`
          : dialect.validate(body)
        received.push({ index, at: Date.now(), path, headers: req.headers, body, invalid })
        notify()
        if (invalid !== undefined) {
          answer(res, {
            kind: "json",
            status: 400,
            body: { error: { message: invalid, type: "invalid_request_error", code: null } }
          })
          return
        }
        const step = steps[index]
        if (step === undefined) {
          answer(res, { kind: "json", status: 500, body: { error: { message: `no scripted reply for request ${index}` } } })
          return
        }
        answer(res, typeof step === "function" ? step(body, index) : step)
      })
    })
    yield* Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.void))
    })
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        for (const timer of timers) {
          clearInterval(timer)
          clearTimeout(timer)
        }
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
    )
    const { port } = server.address() as AddressInfo
    return {
      baseUrl: `http://127.0.0.1:${port}/v1`,
      origin: `http://127.0.0.1:${port}`,
      received,
      waitFor: (count) =>
        Effect.async<void>((resume) => {
          if (received.length >= count) return resume(Effect.void)
          waiters.push({ count, resume: () => resume(Effect.void) })
        })
    }
  })

/** A port on 127.0.0.1 that nothing listens on (it was free a moment ago). */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const probe = Http.createServer()
  probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address() as AddressInfo
    probe.close(() => resume(Effect.succeed(port)))
  })
})

// ---------------------------------------------------------------------------------------------
// Wire answers
// ---------------------------------------------------------------------------------------------

let nextId = 0

/** A Chat Completions answer as OpenAI sends it. */
export const completion = (options: {
  readonly content?: string | null
  readonly toolCalls?: ReadonlyArray<{ readonly id?: string; readonly name: string; readonly arguments: string }>
  readonly finishReason?: string
  readonly usage?: { readonly prompt_tokens: number; readonly completion_tokens: number }
}): Reply => ({
  kind: "json",
  body: {
    id: `chatcmpl-${nextId++}`,
    object: "chat.completion",
    created: 1_700_000_000,
    model: "fake-model",
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: options.content === undefined ? null : options.content,
        ...(options.toolCalls === undefined ? {} : {
          tool_calls: options.toolCalls.map((call, i) => ({
            id: call.id ?? `call_srv_${i}`,
            type: "function",
            function: { name: call.name, arguments: call.arguments }
          }))
        })
      },
      logprobs: null,
      finish_reason: options.finishReason ?? (options.toolCalls === undefined ? "stop" : "tool_calls")
    }],
    usage: options.usage ?? { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 }
  }
})

/** An OpenAI-style error answer. */
export const error = (status: number, message: string, headers?: Record<string, string>): Reply => ({
  kind: "json",
  status,
  body: { error: { message, type: status === 429 ? "rate_limit_exceeded" : "server_error", code: null } },
  ...(headers === undefined ? {} : { headers })
})

/**
 * A streamed answer as OpenAI sends it: a role chunk, text in pieces, each tool call as a
 * first fragment (id, name) and its arguments in pieces, the finish reason, a usage chunk, and
 * `[DONE]`.
 */
export const streamed = (options: {
  readonly content?: string
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly finishReason: string
  readonly pieces?: number
}): ReadonlyArray<unknown> => {
  const split = (text: string) => {
    const size = Math.max(1, Math.ceil(text.length / (options.pieces ?? 3)))
    const out: Array<string> = []
    for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
    return out
  }
  const chunk = (delta: unknown, finish: string | null = null) => ({
    id: "chatcmpl-s",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "fake-model",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
  })
  return [
    chunk({ role: "assistant", content: "" }),
    ...split(options.content ?? "").map((piece) => chunk({ content: piece })),
    ...(options.toolCalls ?? []).flatMap((call, index) => [
      chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }),
      ...split(call.arguments).map((piece) => chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    ]),
    chunk({}, options.finishReason),
    { id: "chatcmpl-s", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } },
    "[DONE]"
  ]
}
