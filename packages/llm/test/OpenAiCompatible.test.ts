import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Action, LanguageModel } from "@rx/kernel"
import { Cause, Chunk, Effect, Either, Exit, Fiber, Layer, Option, Redacted, TestClock } from "effect"
import { OpenAiCompatible } from "../src/index.js"
import * as Fake from "./FakeServer.js"

const tools: ReadonlyArray<{ name: string; description: string; parameters: Record<string, unknown>; idempotent: boolean }> = [
  {
    name: "read_file",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    idempotent: true
  },
  {
    name: "done",
    description: "Finish the goal.",
    parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
    idempotent: true
  }
]

const first: LanguageModel.Request = {
  system: "You are rx.",
  messages: [{ role: "user", content: "Read README.md" }],
  tools
}

/** A conversation with an earlier tool call and its result. */
const second: LanguageModel.Request = {
  system: "You are rx.",
  messages: [
    { role: "user", content: "Read README.md" },
    { role: "assistant", content: "", toolCalls: [{ id: "call_0", name: "read_file", arguments: "{\"path\":\"README.md\"}" }] },
    { role: "tool", toolCallId: "call_0", name: "read_file", content: "{\"content\":\"# hi\"}" }
  ],
  tools
}

type Overrides = Partial<OpenAiCompatible.Input>

/** Run `f` with a model pointed at a fresh fake server scripted with `steps`. */
const withServer = <A, E>(
  steps: ReadonlyArray<Fake.Step>,
  overrides: Overrides,
  f: (model: LanguageModel.LanguageModel["Type"], server: Fake.FakeServer) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const server = yield* Fake.make(steps)
    const model = yield* OpenAiCompatible.make({
      baseUrl: server.baseUrl,
      model: "fake-model",
      retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 },
      ...overrides
    })
    return yield* f(model, server)
  }).pipe(Effect.provide(NodeHttpClient.layerUndici), Effect.scoped)

const failure = <A>(exit: Exit.Exit<A, LanguageModel.ModelError>): LanguageModel.ModelError =>
  Exit.match(exit, {
    onSuccess: (value) => assert.fail(`expected a failure, got ${JSON.stringify(value)}`),
    onFailure: (cause) =>
      Option.getOrElse(Cause.failureOption(cause), () => assert.fail(`expected a ModelError, got ${Cause.pretty(cause)}`))
  })

/** Yield to the event loop for real time, so the real server and client make progress. */
const realPause = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Wait (in real time) until the TestClock has a sleep pending that `accept` likes. */
const pendingSleep = (accept: (deadline: number) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 3000; i++) {
      const sleeps = yield* TestClock.sleeps()
      const found = Chunk.findFirst(sleeps, accept)
      if (Option.isSome(found)) return found.value
      yield* realPause(5)
    }
    return assert.fail("no matching sleep was scheduled")
  })

describe("OpenAiCompatible (tools mode)", () => {
  it.live("sends a valid request built from the kernel's request and maps a tool call", () =>
    withServer(
      [Fake.completion({ toolCalls: [{ id: "call_abc", name: "read_file", arguments: "{\"path\":\"README.md\"}" }] })],
      { apiKey: Redacted.make("sk-test"), temperature: 0, maxTokens: 512 },
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate(first)
          assert.deepStrictEqual(response, {
            text: "",
            toolCalls: [{ id: "call_abc", name: "read_file", arguments: "{\"path\":\"README.md\"}" }],
            finishReason: "tool_calls",
            usage: { inputTokens: 11, outputTokens: 7 }
          })
          assert.strictEqual(server.received.length, 1)
          const [request] = server.received
          assert.isDefined(request)
          assert.isUndefined(request.invalid)
          assert.strictEqual(request.headers.authorization, "Bearer sk-test")
          assert.deepStrictEqual(request.body, {
            model: "fake-model",
            messages: [{ role: "system", content: "You are rx." }, { role: "user", content: "Read README.md" }],
            tools: tools.map((tool) => ({
              type: "function",
              function: { name: tool.name, description: tool.description, parameters: tool.parameters }
            })),
            tool_choice: "auto",
            parallel_tool_calls: false,
            temperature: 0,
            max_tokens: 512,
            stream: false
          })
        })
    ))

  it.live("tells the span it runs in (the kernel's model call) the request's and the answer's GenAI attributes", () =>
    withServer([Fake.completion({ content: "hi" })], { temperature: 0.5, maxTokens: 100 }, (model, server) =>
      Effect.gen(function*() {
        const span = yield* Effect.useSpan("chat", (span) => Effect.as(Effect.withParentSpan(model.generate(first), span), span))
        const { "gen_ai.response.id": id, ...attributes } = Object.fromEntries(span.attributes)
        assert.match(String(id), /^chatcmpl-\d+$/)
        assert.deepStrictEqual(attributes, {
          "gen_ai.provider.name": "openai",
          "gen_ai.request.model": "fake-model",
          "gen_ai.request.temperature": 0.5,
          "gen_ai.request.max_tokens": 100,
          "server.address": "127.0.0.1",
          "server.port": Number(new URL(server.baseUrl).port),
          "gen_ai.response.model": "fake-model"
        })
      })))

  it.live("sends earlier tool calls and their results in the API's shape, ids passed through", () =>
    withServer([Fake.completion({ content: "All read." })], {}, (model, server) =>
      Effect.gen(function*() {
        const response = yield* model.generate(second)
        assert.strictEqual(response.text, "All read.")
        assert.strictEqual(response.finishReason, "stop")
        const [request] = server.received
        assert.isUndefined(request?.invalid)
        assert.isUndefined(request?.headers.authorization)
        assert.deepStrictEqual((request?.body as { messages: unknown }).messages, [
          { role: "system", content: "You are rx." },
          { role: "user", content: "Read README.md" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_0", type: "function", function: { name: "read_file", arguments: "{\"path\":\"README.md\"}" } }]
          },
          { role: "tool", tool_call_id: "call_0", content: "{\"content\":\"# hi\"}" }
        ])
      })))

  it.live("passes malformed argument JSON through untouched, for the kernel to reject", () =>
    withServer([Fake.completion({ toolCalls: [{ name: "read_file", arguments: "{\"path\": \"READ" }] })], {}, (model) =>
      Effect.gen(function*() {
        const response = yield* model.generate(first)
        assert.deepStrictEqual(response.toolCalls, [{ id: "call_srv_0", name: "read_file", arguments: "{\"path\": \"READ" }])
      })))

  it.live("passes an unknown tool through, for the kernel to reject", () =>
    withServer([Fake.completion({ toolCalls: [{ name: "rm_rf", arguments: "{}" }] })], {}, (model) =>
      Effect.gen(function*() {
        const response = yield* model.generate(first)
        assert.strictEqual(response.toolCalls[0]?.name, "rm_rf")
      })))

  it.live("keeps plain text as text", () =>
    withServer([Fake.completion({ content: "{\"tool\":\"done\",\"input\":{\"summary\":\"ok\"}}" })], {}, (model) =>
      Effect.gen(function*() {
        const response = yield* model.generate(first)
        assert.deepStrictEqual(response.toolCalls, [])
        assert.strictEqual(response.text, "{\"tool\":\"done\",\"input\":{\"summary\":\"ok\"}}")
      })))

  it.live("reports an answer cut off by the token limit as finishReason length", () =>
    withServer(
      [Fake.completion({ toolCalls: [{ name: "read_file", arguments: "{\"pa" }], finishReason: "length" })],
      {},
      (model) =>
        Effect.gen(function*() {
          const response = yield* model.generate(first)
          assert.strictEqual(response.finishReason, "length")
          assert.strictEqual(response.toolCalls[0]?.arguments, "{\"pa")
        })
    ))

  it.live("stops reading an answer past maxResponseBytes and hands the kernel an oversized answer", () =>
    withServer(
      [Fake.completion({ toolCalls: [{ name: "write_file", arguments: JSON.stringify({ path: "a", content: "x".repeat(3_000_000) }) }] })],
      { maxResponseBytes: 1_000_000 },
      (model) =>
        Effect.gen(function*() {
          const response = yield* model.generate(first)
          assert.strictEqual(response.text, "")
          assert.deepStrictEqual(response.toolCalls, [])
          assert.isAbove(response.oversize ?? 0, 1_000_000)
          const decision = Action.decide(response, [], () => Either.right({}))
          assert.strictEqual(decision._tag === "Reject" ? decision.kind : decision._tag, "too_large")
        })
    ))

  it.live("accepts arguments sent as an object, and a missing id, without interpreting them", () =>
    withServer([{
      kind: "json",
      body: {
        choices: [{
          message: { role: "assistant", content: null, tool_calls: [{ function: { name: "read_file", arguments: { path: "a" } } }] },
          finish_reason: "tool_calls"
        }]
      }
    }], {}, (model) =>
      Effect.gen(function*() {
        const response = yield* model.generate(first)
        assert.deepStrictEqual(response.toolCalls, [{ id: "call_0", name: "read_file", arguments: "{\"path\":\"a\"}" }])
        assert.deepStrictEqual(response.usage, { inputTokens: 0, outputTokens: 0 })
      })))

  it.live("omits parallel_tool_calls when configured to", () =>
    withServer([Fake.completion({ content: "x" })], { parallelToolCalls: "omit" }, (model, server) =>
      Effect.gen(function*() {
        yield* model.generate(first)
        assert.notProperty(server.received[0]?.body, "parallel_tool_calls")
      })))

  it.live("sends maxTokens as max_completion_tokens when configured to", () =>
    withServer([Fake.completion({ content: "x" })], { maxTokens: 99, maxTokensParameter: "max_completion_tokens" }, (model, server) =>
      Effect.gen(function*() {
        yield* model.generate(first)
        assert.notProperty(server.received[0]?.body, "max_tokens")
        assert.propertyVal(server.received[0]?.body, "max_completion_tokens", 99)
      })))

  it.live("refuses to send a conversation the API would reject", () =>
    withServer([], {}, (model, server) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(model.generate({
          ...second,
          messages: second.messages.slice(0, 2)
        }))
        const error = failure(exit)
        assert.include(error.message, "tool call \"call_0\" has no result")
        assert.strictEqual(server.received.length, 0)
      })))
})

describe("OpenAiCompatible (JSON mode)", () => {
  it.live("asks for a JSON action, sends no tools, and renders history as text", () =>
    withServer(
      [Fake.completion({ content: "{\"thought\":\"done\",\"tool\":\"done\",\"input\":{\"summary\":\"ok\"}}" })],
      { mode: "json" },
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate({
            ...second,
            messages: [
              ...second.messages,
              { role: "user", content: "Keep going." },
              { role: "assistant", content: "checking", toolCalls: [{ id: "call_1", name: "read_file", arguments: "{bad" }] },
              { role: "tool", toolCallId: "call_1", name: "read_file", content: "invalid JSON" }
            ]
          })
          assert.deepStrictEqual(response.toolCalls, [])
          assert.strictEqual(response.text, "{\"thought\":\"done\",\"tool\":\"done\",\"input\":{\"summary\":\"ok\"}}")
          const [request] = server.received
          assert.isUndefined(request?.invalid)
          const body = request?.body as {
            tools?: unknown
            parallel_tool_calls?: unknown
            response_format: { type: string; json_schema: { name: string; schema: { anyOf: Array<unknown> } } }
            messages: Array<{ role: string; content: string }>
          }
          assert.isUndefined(body.tools)
          assert.isUndefined(body.parallel_tool_calls)
          assert.strictEqual(body.response_format.type, "json_schema")
          assert.strictEqual(body.response_format.json_schema.schema.anyOf.length, 2)
          assert.deepStrictEqual(body.messages.map((m) => m.role), ["system", "user", "assistant", "user", "assistant", "user"])
          assert.include(body.messages[0]?.content, "You are rx.")
          assert.include(body.messages[0]?.content, "read_file: Read a file.")
          assert.strictEqual(body.messages[2]?.content, "{\"tool\":\"read_file\",\"input\":{\"path\":\"README.md\"}}")
          assert.strictEqual(body.messages[3]?.content, "Result of read_file:\n{\"content\":\"# hi\"}\n\nKeep going.")
          assert.strictEqual(body.messages[4]?.content, "{\"thought\":\"checking\",\"tool\":\"read_file\",\"input\":\"{bad\"}")
        })
    ))
})

describe("OpenAiCompatible (resilience)", () => {
  it.effect("honours Retry-After on 429, on the clock, and does not retry early", () =>
    withServer(
      [Fake.error(429, "Rate limit reached", { "retry-after": "7" }), Fake.completion({ content: "ok" })],
      { retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } },
      (model, server) =>
        Effect.gen(function*() {
          const fiber = yield* Effect.fork(model.generate(first))
          // The only sleep of 7 s from now is the retry's (the timeouts are minutes long).
          const deadline = yield* pendingSleep((at) => at === 7_000)
          assert.strictEqual(deadline, 7_000)
          yield* TestClock.adjust("6999 millis")
          yield* realPause(50)
          assert.strictEqual(server.received.length, 1)
          yield* TestClock.adjust("1 millis")
          const response = yield* Fiber.join(fiber)
          assert.strictEqual(response.text, "ok")
          assert.strictEqual(server.received.length, 2)
        })
    ))

  it.effect("backs off exponentially with jitter on 503, within bounds", () =>
    withServer(
      [Fake.error(503, "overloaded"), Fake.error(503, "overloaded"), Fake.completion({ content: "ok" })],
      { retry: { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000 } },
      (model, server) =>
        Effect.gen(function*() {
          const fiber = yield* Effect.fork(model.generate(first))
          const firstWait = yield* pendingSleep((at) => at >= 500 && at <= 1_000)
          yield* TestClock.adjust(`${firstWait} millis`)
          yield* server.waitFor(2)
          const secondWait = yield* pendingSleep((at) => at >= firstWait + 1_000 && at <= firstWait + 2_000)
          yield* TestClock.adjust(`${secondWait - firstWait} millis`)
          const response = yield* Fiber.join(fiber)
          assert.strictEqual(response.text, "ok")
          assert.strictEqual(server.received.length, 3)
        })
    ))

  it.live("does not retry other 4xx, and names the server, the status and its message", () =>
    withServer([Fake.error(400, "model 'nope' does not support tools")], {}, (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(first)))
        assert.strictEqual(error.status, 400)
        assert.strictEqual(error.server, server.baseUrl)
        assert.include(error.message, server.baseUrl)
        assert.include(error.message, "400")
        assert.include(error.message, "model 'nope' does not support tools")
        assert.strictEqual(server.received.length, 1)
      })))

  it.live("reports a plain-text error body", () =>
    withServer([{ kind: "text", status: 404, body: "404 page not found" }], {}, (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(first)))
        assert.strictEqual(error.status, 404)
        assert.include(error.message, "404 page not found")
        assert.include(error.message, "base URL ends in /v1")
        assert.strictEqual(server.received.length, 1)
      })))

  it.live("gives up after maxAttempts, saying how many", () =>
    withServer([Fake.error(503, "busy"), Fake.error(502, "bad gateway"), Fake.error(500, "boom")], {}, (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(first)))
        assert.strictEqual(error.status, 500)
        assert.include(error.message, "boom")
        assert.include(error.message, "gave up after 3 attempts")
        assert.strictEqual(server.received.length, 3)
        // Backoff happened between attempts: at least half the base delay each time.
        const [a, b, c] = server.received
        assert.isAtLeast((b?.at ?? 0) - (a?.at ?? 0), 4)
        assert.isAtLeast((c?.at ?? 0) - (b?.at ?? 0), 9)
      })))

  it.live("does not wait for a Retry-After beyond the total timeout", () =>
    withServer([Fake.error(429, "slow down", { "retry-after": "3600" })], { timeoutMs: 60_000 }, (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(first)))
        assert.strictEqual(error.status, 429)
        assert.include(error.message, "total timeout")
        assert.strictEqual(server.received.length, 1)
      })))

  it.live("retries a dropped connection", () =>
    withServer([{ kind: "drop" }, Fake.completion({ content: "ok" })], {}, (model, server) =>
      Effect.gen(function*() {
        const response = yield* model.generate(first)
        assert.strictEqual(response.text, "ok")
        assert.strictEqual(server.received.length, 2)
      })))

  it.live("reports a dropped connection once attempts run out", () =>
    withServer([{ kind: "drop" }, { kind: "drop" }], { retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 10 } }, (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(first)))
        assert.include(error.message, `the connection to ${server.baseUrl} failed`)
        assert.include(error.message, "gave up after 2 attempts")
        assert.isUndefined(error.status)
        assert.strictEqual(server.received.length, 2)
      })))

  it.live("times out a stalled response (idle timeout) and retries it", () =>
    withServer(
      [{ kind: "stall" }, Fake.completion({ content: "ok" })],
      { idleTimeoutMs: 200 },
      (model, server) =>
        Effect.gen(function*() {
          const started = Date.now()
          const response = yield* model.generate(first)
          assert.strictEqual(response.text, "ok")
          assert.strictEqual(server.received.length, 2)
          assert.isAtLeast(Date.now() - started, 190)
        })
    ))

  it.live("times out a body that stops half-way (idle timeout)", () =>
    withServer(
      [{ kind: "stallBody" }],
      { idleTimeoutMs: 200, retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } },
      (model, server) =>
        Effect.gen(function*() {
          const started = Date.now()
          const error = failure(yield* Effect.exit(model.generate(first)))
          assert.include(error.message, "sent nothing for 200 ms (idle timeout, in the middle of the answer)")
          assert.strictEqual(error.server, server.baseUrl)
          assert.isAtLeast(Date.now() - started, 190)
        })
    ))

  it.live("ends a response that trickles forever at the total timeout", () =>
    withServer(
      [{ kind: "dribble", everyMs: 20 }, { kind: "dribble", everyMs: 20 }],
      { idleTimeoutMs: 5_000, timeoutMs: 400 },
      (model, server) =>
        Effect.gen(function*() {
          const started = Date.now()
          const error = failure(yield* Effect.exit(model.generate(first)))
          assert.include(error.message, `no complete answer from ${server.baseUrl} within 400 ms (total timeout, 1 attempt)`)
          assert.isAtLeast(Date.now() - started, 390)
        })
    ))

  it.effect("times out on the clock too (TestClock)", () =>
    withServer([{ kind: "stall" }], { idleTimeoutMs: 30_000, retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } }, (model, server) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.fork(Effect.exit(model.generate(first)))
        yield* server.waitFor(1)
        yield* pendingSleep((at) => at === 30_000)
        yield* TestClock.adjust("30 seconds")
        const error = failure(yield* Fiber.join(fiber))
        assert.include(error.message, "idle timeout, waiting for the answer to start")
      })))

  it("names the server a local port usually belongs to", () => {
    assert.strictEqual(OpenAiCompatible.likelyServer("http://127.0.0.1:11434/v1"), "Ollama")
    assert.strictEqual(OpenAiCompatible.likelyServer("http://localhost:8080/v1"), "the llama.cpp server")
    assert.strictEqual(OpenAiCompatible.likelyServer("http://127.0.0.1:8000/v1"), "vLLM")
    assert.strictEqual(OpenAiCompatible.likelyServer("http://127.0.0.1:1234/v1"), "LM Studio")
    assert.strictEqual(OpenAiCompatible.likelyServer("http://127.0.0.1:9999/v1"), "the model server")
    assert.strictEqual(OpenAiCompatible.likelyServer("https://api.example.com:11434/v1"), "the model server")
  })

  it.live("a user and password in the base URL go as Basic credentials, and no message, error or trace names them", () =>
    Effect.gen(function*() {
      const server = yield* Fake.make([Fake.completion({ content: "hi" }), Fake.error(400, "no")])
      const withUser = server.baseUrl.replace("http://", "http://alice:s3cr%40t@")
      const model = yield* OpenAiCompatible.make({ baseUrl: withUser, model: "m", retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } })
      yield* model.generate(first)
      assert.strictEqual(server.received[0]?.headers.authorization, `Basic ${Buffer.from("alice:s3cr@t").toString("base64")}`)
      assert.strictEqual(server.received[0]?.path, "/v1/chat/completions")
      const error = failure(yield* Effect.exit(model.generate(first)))
      assert.strictEqual(error.server, server.baseUrl)
      assert.notInclude(error.message, "s3cr")
      assert.notInclude(error.message, "alice")
      // Nothing listening: the message names the server without them too.
      const port = yield* Fake.freePort
      const unreachable = yield* OpenAiCompatible.make({ baseUrl: `http://bob:hunter2@127.0.0.1:${port}/v1`, model: "m", retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } })
      const refused = failure(yield* Effect.exit(unreachable.generate(first)))
      assert.include(refused.message, `cannot reach http://127.0.0.1:${port}/v1`)
      assert.notInclude(JSON.stringify(refused), "hunter2")
      // An API key, when set, is sent instead.
      const keyed = yield* Fake.make([Fake.completion({ content: "hi" })])
      const both = yield* OpenAiCompatible.make({ baseUrl: keyed.baseUrl.replace("http://", "http://alice:pw@"), model: "m", apiKey: Redacted.make("sk-1") })
      yield* both.generate(first)
      assert.strictEqual(keyed.received[0]?.headers.authorization, "Bearer sk-1")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici), Effect.scoped))

  it.live("says the server cannot be reached when nothing listens", () =>
    Effect.gen(function*() {
      const port = yield* Fake.freePort
      const baseUrl = `http://127.0.0.1:${port}/v1`
      const model = yield* OpenAiCompatible.make({
        baseUrl,
        model: "m",
        retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 10 }
      })
      const error = failure(yield* Effect.exit(model.generate(first)))
      assert.include(error.message, `cannot reach ${baseUrl}: is the model server running? (pass --base-url)`)
      assert.include(error.message, "gave up after 2 attempts")
      assert.strictEqual(error.server, baseUrl)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

})

describe("OpenAiCompatible (answers that are not Chat Completions)", () => {
  /** The one-line error a single reply gives; such an answer is never retried. */
  const answered = (reply: Fake.Reply, overrides: Overrides = {}) =>
    withServer([reply, reply, reply], overrides, (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(first)))
        assert.strictEqual(server.received.length, 1)
        assert.notInclude(error.message, "\n")
        assert.isBelow(error.message.length, 200)
        assert.strictEqual(error.status, 200)
        return { message: error.message, baseUrl: server.baseUrl }
      }))

  const html = "<!DOCTYPE html>\n<html><head><title>Open WebUI</title></head><body>" + "<div>app</div>".repeat(200) + "</body></html>"

  it.live("an HTML page: the base URL is likely not the API root", () =>
    Effect.gen(function*() {
      const { baseUrl, message } = yield* answered({ kind: "text", status: 200, body: html, headers: { "content-type": "text/html" } })
      assert.strictEqual(message, `${baseUrl} answered HTML, not JSON (is the base URL the API root, e.g. .../v1?)`)
    }))

  it.live("an HTML page, when streaming", () =>
    Effect.gen(function*() {
      const { baseUrl, message } = yield* answered({ kind: "text", status: 200, body: html, headers: { "content-type": "text/html" } }, { stream: true })
      assert.strictEqual(message, `${baseUrl} answered HTML, not JSON (is the base URL the API root, e.g. .../v1?)`)
    }))

  it.live("an empty body", () =>
    Effect.gen(function*() {
      const { baseUrl, message } = yield* answered({ kind: "text", status: 200, body: "" })
      assert.strictEqual(message, `${baseUrl} answered an empty body`)
    }))

  it.live("JSON of another shape: what is missing, in a few words", () =>
    Effect.gen(function*() {
      const unrelated = yield* answered({ kind: "json", body: { result: "hello", data: Array.from({ length: 50 }, (_, i) => ({ i })) } })
      assert.strictEqual(unrelated.message, `${unrelated.baseUrl} answered JSON that is not a Chat Completions response: missing field "choices"`)
      const wrong = yield* answered({ kind: "json", body: { choices: [{ message: { content: 7 } }] } })
      assert.strictEqual(
        wrong.message,
        `${wrong.baseUrl} answered JSON that is not a Chat Completions response: choices[0].message.content: expected a string or null, got 7`
      )
    }))

  it.live("text that is not JSON, and an error sent with status 200", () =>
    Effect.gen(function*() {
      const text = yield* answered({ kind: "text", status: 200, body: "Service starting, please wait" })
      assert.strictEqual(text.message, `${text.baseUrl} answered text that is not JSON: Service starting, please wait`)
      const error = yield* answered({ kind: "json", body: { error: { message: "model \"m\" is not loaded" } } })
      assert.strictEqual(error.message, `${error.baseUrl} answered an error: model "m" is not loaded`)
    }))
})

describe("OpenAiCompatible (configuration)", () => {
  const refused = (input: OpenAiCompatible.Input) =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(OpenAiCompatible.config(input))
      assert.strictEqual(error._tag, "@rx/llm/InvalidConfig")
      assert.notInclude(error.message, "\n")
      return error.message
    })

  it.effect("an invalid configuration is one line naming each field", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* refused({ baseUrl: "http://x/v1", model: "" }), "invalid model configuration: model: must not be empty")
      assert.strictEqual(
        yield* refused({ baseUrl: "http://x/v1", model: "m", timeoutMs: -1, retry: { maxAttempts: 0, baseDelayMs: 10, maxDelayMs: 10 } }),
        "invalid model configuration: timeoutMs: expected an integer >= 1, got -1; retry.maxAttempts: expected an integer between 1 and 100, got 0"
      )
    }))

  it.effect("the base URL must be an absolute http: or https: URL", () =>
    Effect.gen(function*() {
      assert.strictEqual(
        yield* refused({ baseUrl: "not a url", model: "m" }),
        "invalid model configuration: baseUrl: expected an http:// or https:// URL such as http://127.0.0.1:11434/v1, got \"not a url\""
      )
      for (const baseUrl of ["ftp://x", "localhost:11434/v1", "/v1", "", " http://x/v1"]) {
        assert.include(yield* refused({ baseUrl, model: "m" }), "baseUrl: expected an http:// or https:// URL")
      }
      for (const baseUrl of ["http://127.0.0.1:11434/v1", "https://api.openai.com/v1", "http://[::1]:8080/v1/"]) {
        assert.isTrue(Either.isRight(yield* Effect.either(OpenAiCompatible.config({ baseUrl, model: "m" }))))
      }
    }))

  it.effect("the layer refuses it when it is built", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(OpenAiCompatible.layerNode({ baseUrl: "ftp://x", model: "m" })))
      assert.strictEqual(error._tag, "@rx/llm/InvalidConfig")
      assert.include(error.message, "baseUrl: expected an http:// or https:// URL such as http://127.0.0.1:11434/v1, got \"ftp://x\"")
    }).pipe(Effect.scoped))
})
