import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import type { LanguageModel } from "@rx/kernel"
import { Cause, Effect, Either, Exit, Option } from "effect"
import { ChatCompletions, OpenAiCompatible } from "../src/index.js"
import * as Fake from "./FakeServer.js"

const request: LanguageModel.Request = {
  system: "s",
  messages: [{ role: "user", content: "u" }],
  tools: [{ name: "read_file", description: "Read.", parameters: { type: "object" }, idempotent: true }]
}

const withStreaming = <A, E>(
  steps: ReadonlyArray<Fake.Step>,
  overrides: Partial<OpenAiCompatible.Input>,
  f: (model: LanguageModel.LanguageModel["Type"], server: Fake.FakeServer) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const server = yield* Fake.make(steps)
    const model = yield* OpenAiCompatible.make({
      baseUrl: server.baseUrl,
      model: "fake-model",
      stream: true,
      retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 10 },
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

describe("streaming", () => {
  it("assembles tool call fragments, text, finish reason and usage", () => {
    const body = Fake.streamed({
      content: "Let me read it.",
      toolCalls: [{ id: "call_9", name: "read_file", arguments: "{\"path\":\"README.md\"}" }],
      finishReason: "tool_calls"
    }).map((event) => `data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`).join("")
    const assembled = ChatCompletions.assembleStream(body)
    assert.isTrue(Either.isRight(assembled))
    if (Either.isRight(assembled)) {
      assert.deepStrictEqual(ChatCompletions.toResponse(assembled.right), Either.right({
        text: "Let me read it.",
        toolCalls: [{ id: "call_9", name: "read_file", arguments: "{\"path\":\"README.md\"}" }],
        finishReason: "tool_calls",
        usage: { inputTokens: 5, outputTokens: 3 }
      }))
    }
  })

  it("joins tool call fragments by index when ids arrive empty or change per chunk and names arrive again with every chunk", () => {
    const chunk = (call: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ choices: [{ index: 0, delta: call === null ? {} : { tool_calls: [call] }, finish_reason: finish }] })}\n\n`
    const body = [
      chunk({ index: 0, id: "", type: "function", function: { name: "read_file", arguments: "" } }),
      chunk({ index: 0, id: "call_x1", function: { name: "read_file", arguments: "{\"path\":" } }),
      chunk({ index: 1, id: "call_y", function: { name: "list_", arguments: "{}" } }),
      chunk({ index: 0, id: "call_x2", function: { name: "", arguments: "\"a.md\"}" } }),
      chunk({ index: 1, id: "", function: { name: "dir", arguments: "" } }),
      chunk(null, "tool_calls"),
      "data: [DONE]\n\n"
    ].join("")
    const assembled = ChatCompletions.assembleStream(body)
    assert.isTrue(Either.isRight(assembled))
    if (Either.isRight(assembled)) {
      assert.deepStrictEqual(Either.map(ChatCompletions.toResponse(assembled.right), (r): ReadonlyArray<unknown> => r.toolCalls), Either.right<ReadonlyArray<unknown>>([
        { id: "call_x1", name: "read_file", arguments: "{\"path\":\"a.md\"}" },
        { id: "call_y", name: "list_dir", arguments: "{}" }
      ]))
    }
  })

  it("reports a stream cut short as dropped, and an error event as not retryable", () => {
    assert.deepStrictEqual(
      ChatCompletions.assembleStream("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n"),
      Either.left({ message: "stopped the answer before it was complete", dropped: true })
    )
    const error = ChatCompletions.assembleStream("data: {\"error\":{\"message\":\"context too long\"}}\n\n")
    assert.isTrue(Either.isLeft(error) && !error.left.dropped && error.left.message.includes("context too long"))
  })

  it.live("asks for a stream and maps a streamed tool call", () =>
    withStreaming(
      [{
        kind: "sse",
        everyMs: 5,
        events: Fake.streamed({ toolCalls: [{ id: "call_1", name: "read_file", arguments: "{\"path\": \"READ" }], finishReason: "tool_calls" })
      }],
      {},
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate(request)
          assert.deepStrictEqual(response.toolCalls, [{ id: "call_1", name: "read_file", arguments: "{\"path\": \"READ" }])
          assert.strictEqual(response.text, "")
          const body = server.received[0]?.body as { stream: boolean; stream_options: unknown }
          assert.strictEqual(body.stream, true)
          assert.deepStrictEqual(body.stream_options, { include_usage: true })
          assert.strictEqual(server.received[0]?.headers.accept, "text/event-stream")
        })
    ))

  it.live("keeps length from a streamed answer", () =>
    withStreaming([{ kind: "sse", events: Fake.streamed({ content: "{\"tool\":\"rea", finishReason: "length" }) }], {}, (model) =>
      Effect.gen(function*() {
        const response = yield* model.generate(request)
        assert.strictEqual(response.finishReason, "length")
        assert.strictEqual(response.text, "{\"tool\":\"rea")
      })))

  it.live("a slow but steady stream outlives the idle timeout", () =>
    withStreaming(
      [{ kind: "sse", everyMs: 100, events: Fake.streamed({ content: "a fairly long answer", finishReason: "stop", pieces: 10 }) }],
      { idleTimeoutMs: 1_000 },
      (model, server) =>
        Effect.gen(function*() {
          const started = Date.now()
          const response = yield* model.generate(request)
          assert.strictEqual(response.text, "a fairly long answer")
          assert.strictEqual(server.received.length, 1)
          // The answer took longer than the idle timeout: the timeout is between chunks, not in all.
          assert.isAtLeast(Date.now() - started, 1_200)
        })
    ))

  it.live("a stream that goes silent half-way hits the idle timeout, then the retry succeeds", () =>
    withStreaming(
      [
        { kind: "sse", events: Fake.streamed({ content: "partial answer", finishReason: "stop" }), stallAfter: 2 },
        { kind: "sse", events: Fake.streamed({ content: "whole answer", finishReason: "stop" }) }
      ],
      { idleTimeoutMs: 200 },
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate(request)
          assert.strictEqual(response.text, "whole answer")
          assert.strictEqual(server.received.length, 2)
        })
    ))

  it.live("a stream whose connection drops is retried, then reported", () =>
    withStreaming(
      [
        { kind: "sse", events: Fake.streamed({ content: "partial", finishReason: "stop" }), dropAfter: 2 },
        { kind: "sse", events: Fake.streamed({ content: "partial", finishReason: "stop" }), dropAfter: 2 }
      ],
      {},
      (model, server) =>
        Effect.gen(function*() {
          const error = failure(yield* Effect.exit(model.generate(request)))
          assert.include(error.message, `the connection to ${server.baseUrl}`)
          assert.include(error.message, "gave up after 2 attempts")
          assert.strictEqual(server.received.length, 2)
        })
    ))

  it.live("a stream that ends early without an error is retried", () =>
    withStreaming(
      [
        { kind: "sse", events: Fake.streamed({ content: "partial", finishReason: "stop" }).slice(0, 2) },
        { kind: "sse", events: Fake.streamed({ content: "whole", finishReason: "stop" }) }
      ],
      {},
      (model, server) =>
        Effect.gen(function*() {
          const response = yield* model.generate(request)
          assert.strictEqual(response.text, "whole")
          assert.strictEqual(server.received.length, 2)
        })
    ))

  it.live("an error event inside the stream is reported, naming the server, and not retried", () =>
    withStreaming(
      [{ kind: "sse", events: [{ error: { object: "error", message: "prompt is too long", code: 400 } }] }],
      {},
      (model, server) =>
        Effect.gen(function*() {
          const error = failure(yield* Effect.exit(model.generate(request)))
          assert.include(error.message, `${server.baseUrl} reported an error in the middle of the answer: prompt is too long`)
          assert.strictEqual(server.received.length, 1)
        })
    ))

  it.live("a server that does not stream, answering one JSON body, is read as one answer", () =>
    withStreaming(
      [{ kind: "json", body: { choices: [{ message: { role: "assistant", content: "plain" }, finish_reason: "stop" }] } }],
      {},
      (model, server) =>
        Effect.gen(function*() {
          const answer = yield* model.generate(request)
          assert.strictEqual(answer.text, "plain")
          assert.strictEqual(answer.finishReason, "stop")
          assert.strictEqual(server.received.length, 1)
        })
    ))

  it.live("an answer is decoded as it arrives: complete at [DONE], while the connection is still open", () => {
    const events = Fake.streamed({ content: "decoded while streaming", finishReason: "stop" })
    // The server sends the whole answer, then neither ends the body nor sends more: read whole,
    // the body would only end at the idle timeout (and fail); read as it arrives, [DONE] completes it.
    return withStreaming(
      [{ kind: "sse", events, stallAfter: events.length }],
      { idleTimeoutMs: 3_000, retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } },
      (model, server) =>
        Effect.gen(function*() {
          const answer = yield* model.generate(request)
          assert.strictEqual(answer.text, "decoded while streaming")
          assert.strictEqual(answer.finishReason, "stop")
          assert.strictEqual(server.received.length, 1)
        })
    )
  })

  it.live("an event that spoils the answer ends it at once, without waiting for the rest of the body", () =>
    withStreaming(
      [{ kind: "sse", events: [Fake.streamed({ content: "x", finishReason: "stop" })[0], "{not json"], stallAfter: 2 }],
      { idleTimeoutMs: 3_000, retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } },
      (model, server) =>
        Effect.gen(function*() {
          const error = failure(yield* Effect.exit(model.generate(request)))
          assert.include(error.message, `${server.baseUrl} sent an event that is not JSON: {not json`)
        })
    ))

  it.live("a streamed answer past maxResponseBytes is read no further and reported as oversized", () =>
    withStreaming(
      [{ kind: "sse", events: Fake.streamed({ content: "y".repeat(4_000), finishReason: "stop", pieces: 40 }) }],
      { maxResponseBytes: 2_000 },
      (model) =>
        Effect.gen(function*() {
          const answer = yield* model.generate(request)
          assert.isDefined(answer.oversize)
          assert.isAbove(answer.oversize ?? 0, 2_000)
        })
    ))
})
