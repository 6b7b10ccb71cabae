import { AnthropicClient, AnthropicLanguageModel } from "@effect/ai-anthropic"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { LanguageModel } from "@rx/kernel"
import { Cause, Effect, Exit, Layer, Option, Redacted } from "effect"
import { AiBridge } from "../src/index.js"
import * as Fake from "./FakeServer.js"

const tools = [
  {
    name: "read_file",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"], additionalProperties: false },
    idempotent: true
  },
  {
    name: "done",
    description: "Finish the goal.",
    parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
    idempotent: true
  }
]

const request: LanguageModel.Request = {
  system: "You are rx.",
  messages: [
    { role: "user", content: "Read README.md" },
    { role: "assistant", content: "Reading.", toolCalls: [{ id: "toolu_1", name: "read_file", arguments: "{\"path\":\"README.md\"}" }] },
    { role: "tool", toolCallId: "toolu_1", name: "read_file", content: "{\"content\":\"# hi\"}" }
  ],
  tools
}

/** An Anthropic Messages answer. */
const message = (content: ReadonlyArray<unknown>, stopReason: string): Fake.Reply => ({
  kind: "json",
  body: {
    id: "msg_01",
    type: "message",
    role: "assistant",
    model: "claude-sonnet-4-5",
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: { input_tokens: 21, output_tokens: 9, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  }
})

const withAnthropic = <A, E>(
  steps: ReadonlyArray<Fake.Step>,
  f: (model: LanguageModel.LanguageModel["Type"], server: Fake.FakeServer) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const server = yield* Fake.make(steps, Fake.anthropic)
    const provider = AnthropicLanguageModel.layer({ model: "claude-sonnet-4-5" }).pipe(
      Layer.provide(AnthropicClient.layer({ apiKey: Redacted.make("sk-ant-test"), apiUrl: server.origin })),
      Layer.provide(NodeHttpClient.layerUndici)
    )
    const bridge = AiBridge.layer({ server: "anthropic", retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } })
    return yield* Effect.flatMap(LanguageModel.LanguageModel, (model) => f(model, server)).pipe(
      Effect.provide(Layer.provide(bridge, provider))
    )
  }).pipe(Effect.scoped)

const failure = <A>(exit: Exit.Exit<A, LanguageModel.ModelError>): LanguageModel.ModelError =>
  Exit.match(exit, {
    onSuccess: (value) => assert.fail(`expected a failure, got ${JSON.stringify(value)}`),
    onFailure: (cause) =>
      Option.getOrElse(Cause.failureOption(cause), () => assert.fail(`expected a ModelError, got ${Cause.pretty(cause)}`))
  })

describe("AiBridge with @effect/ai-anthropic", () => {
  it.live("sends the kernel's conversation and tools, and maps a tool call to raw arguments", () =>
    withAnthropic(
      [message([
        { type: "text", text: "Now finishing." },
        { type: "tool_use", id: "toolu_2", name: "done", input: { summary: "read it", extra: [1, 2] } }
      ], "tool_use")],
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate(request)
          assert.deepStrictEqual(response, {
            text: "Now finishing.",
            toolCalls: [{ id: "toolu_2", name: "done", arguments: "{\"summary\":\"read it\",\"extra\":[1,2]}" }],
            finishReason: "tool_calls",
            usage: { inputTokens: 21, outputTokens: 9 }
          })
          const [received] = server.received
          assert.isDefined(received)
          assert.isUndefined(received.invalid)
          assert.strictEqual(received.headers["x-api-key"], "sk-ant-test")
          const body = received.body as {
            system: unknown
            messages: ReadonlyArray<{ role: string; content: ReadonlyArray<Record<string, unknown>> }>
            tools: ReadonlyArray<{ name: string; input_schema: unknown }>
          }
          assert.deepStrictEqual(body.tools.map((tool) => [tool.name, tool.input_schema]), tools.map((tool) => [tool.name, tool.parameters]))
          assert.deepStrictEqual(body.messages.map((m) => m.role), ["user", "assistant", "user"])
          const toolUse = body.messages[1]?.content.find((block) => block.type === "tool_use")
          assert.deepStrictEqual(toolUse?.input, { path: "README.md" })
          assert.strictEqual(toolUse?.id, "toolu_1")
          const toolResult = body.messages[2]?.content.find((block) => block.type === "tool_result")
          assert.strictEqual(toolResult?.tool_use_id, "toolu_1")
          assert.strictEqual(toolResult?.content, "{\"content\":\"# hi\"}")
        })
    ))

  it.live("maps max_tokens to finishReason length", () =>
    withAnthropic([message([{ type: "text", text: "{\"tool\": \"do" }], "max_tokens")], (model) =>
      Effect.gen(function*() {
        const response = yield* model.generate(request)
        assert.strictEqual(response.finishReason, "length")
        assert.strictEqual(response.text, "{\"tool\": \"do")
      })))

  it.live("retries 529 overloaded and 429, then answers", () =>
    withAnthropic(
      [
        { kind: "json", status: 529, body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } },
        {
          kind: "json",
          status: 429,
          headers: { "retry-after": "0" },
          body: { type: "error", error: { type: "rate_limit_error", message: "slow down" } }
        },
        message([{ type: "text", text: "ok" }], "end_turn")
      ],
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate(request)
          assert.strictEqual(response.text, "ok")
          assert.strictEqual(response.finishReason, "stop")
          assert.strictEqual(server.received.length, 3)
        })
    ))

  it.live("does not retry a 400, and names the provider, the status and its message", () =>
    withAnthropic(
      [{
        kind: "json",
        status: 400,
        body: { type: "error", error: { type: "invalid_request_error", message: "max_tokens: too large" } }
      }],
      (model, server) =>
        Effect.gen(function*() {
          const error = failure(yield* Effect.exit(model.generate(request)))
          assert.strictEqual(error.status, 400)
          assert.strictEqual(error.server, "anthropic")
          assert.include(error.message, "max_tokens: too large")
          assert.strictEqual(server.received.length, 1)
        })
    ))

  it.live("an answer calling a tool that was not offered becomes a ModelError (an @effect/ai limit)", () =>
    withAnthropic([message([{ type: "tool_use", id: "toolu_3", name: "rm_rf", input: {} }], "tool_use")], (model, server) =>
      Effect.gen(function*() {
        const error = failure(yield* Effect.exit(model.generate(request)))
        assert.strictEqual(error.server, "anthropic")
        assert.strictEqual(server.received.length, 1)
      })))

  it.live("says when the provider cannot be reached", () =>
    Effect.gen(function*() {
      const port = yield* Fake.freePort
      const provider = AnthropicLanguageModel.layer({ model: "claude-sonnet-4-5" }).pipe(
        Layer.provide(AnthropicClient.layer({ apiKey: Redacted.make("k"), apiUrl: `http://127.0.0.1:${port}` })),
        Layer.provide(NodeHttpClient.layerUndici)
      )
      const bridge = AiBridge.layer({ server: "anthropic", retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 5 } })
      const exit = yield* Effect.exit(
        Effect.flatMap(LanguageModel.LanguageModel, (model) => model.generate(request)).pipe(
          Effect.provide(Layer.provide(bridge, provider))
        )
      )
      const error = failure(exit)
      assert.include(error.message, `cannot reach anthropic (POST http://127.0.0.1:${port}/v1/messages`)
      assert.include(error.message, "ECONNREFUSED")
      assert.include(error.message, "gave up after 2 attempts")
    }))
})
