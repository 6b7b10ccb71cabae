/**
 * The adapter under the kernel's Runner, against the fake server: the failures end as the
 * kernel's rules say, and every request the kernel makes is valid for the API, also after a
 * resume that records a call's outcome as `unknown`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Deferred, Effect, Fiber, Layer, Ref, Schema } from "effect"
import { OpenAiCompatible } from "../src/index.js"
import * as Fake from "./FakeServer.js"

/** Tools that count their invocations; `hang` blocks until interrupted (a crash mid-call). */
const makeTools = Effect.gen(function*() {
  const notes = yield* Ref.make<ReadonlyArray<string>>([])
  const hanging = yield* Deferred.make<void>()
  const note = Tool.make({
    name: "write_note",
    description: "Append a note (not idempotent).",
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ count: Schema.Number }),
    idempotent: false,
    execute: ({ text }) => Ref.updateAndGet(notes, (all) => [...all, text]).pipe(Effect.map((all) => ({ count: all.length })))
  })
  const hang = Tool.make({
    name: "deploy",
    description: "Deploy (not idempotent; slow).",
    input: Schema.Struct({ target: Schema.String }),
    output: Schema.Struct({ ok: Schema.Boolean }),
    idempotent: false,
    execute: () => Deferred.succeed(hanging, undefined).pipe(Effect.zipRight(Effect.never))
  })
  return { notes, hanging, tools: [note, hang] as const }
})

type Setup = Effect.Effect.Success<typeof makeTools>

/** A model on a fake server, the tools above, and a memory store shared by run and resume. */
const withKernel = <A, E>(
  steps: ReadonlyArray<Fake.Step>,
  overrides: Partial<OpenAiCompatible.Input>,
  f: (server: Fake.FakeServer, setup: Setup) => Effect.Effect<A, E, Runner.Services>
) =>
  Effect.gen(function*() {
    const server = yield* Fake.make(steps)
    const setup = yield* makeTools
    const model = OpenAiCompatible.layer({
      baseUrl: server.baseUrl,
      model: "fake-model",
      retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 },
      ...overrides
    }).pipe(Layer.provide(NodeHttpClient.layerUndici))
    const services = Layer.mergeAll(model, ToolRegistry.layer(setup.tools), StateStore.layerMemory)
    return yield* f(server, setup).pipe(Effect.provide(services))
  }).pipe(Effect.scoped)

const call = (name: string, args: string) => Fake.completion({ toolCalls: [{ name, arguments: args }] })
const done = call("done", "{\"summary\":\"finished\"}")

interface WireMessage {
  readonly role: string
  readonly content: string | null
  readonly tool_call_id?: string
  readonly tool_calls?: ReadonlyArray<{ readonly id: string; readonly function: { readonly name: string } }>
}
const messagesOf = (received: Fake.Received | undefined): ReadonlyArray<WireMessage> =>
  (received?.body as { messages: ReadonlyArray<WireMessage> }).messages

/** Every request the server saw was valid for the API (the server checks each one). */
const assertAllValid = (server: Fake.FakeServer) => {
  for (const request of server.received) assert.isUndefined(request.invalid, `request ${request.index}: ${request.invalid}`)
}

describe("the adapter under the kernel's Runner", () => {
  it.live("runs a tool call, then done; each tool call in the next request is paired with its result", () =>
    withKernel([call("write_note", "{\"text\":\"hello\"}"), done], {}, (server, { notes }) =>
      Effect.gen(function*() {
        const result = yield* Runner.run({ goal: "write a note" })
        assert.strictEqual(result.reason, "done")
        assert.deepStrictEqual(yield* Ref.get(notes), ["hello"])
        assert.strictEqual(server.received.length, 2)
        assertAllValid(server)
        const messages = messagesOf(server.received[1])
        const assistant = messages.find((m) => m.tool_calls !== undefined)
        const id = assistant?.tool_calls?.[0]?.id
        assert.isString(id)
        assert.deepStrictEqual(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id), [id])
      })))

  it.live("rejects malformed arguments, an unknown tool and plain text, telling the model in valid requests", () =>
    withKernel(
      [
        call("write_note", "{\"text\": \"hel"),
        call("rm_rf", "{}"),
        Fake.completion({ content: "I think I am done." }),
        done
      ],
      { retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } },
      (server, { notes }) =>
        Effect.gen(function*() {
          const result = yield* Runner.run({ goal: "write a note", options: { maxMalformed: 5 } })
          assert.strictEqual(result.reason, "done")
          assert.deepStrictEqual(yield* Ref.get(notes), [])
          assert.strictEqual(server.received.length, 4)
          assertAllValid(server)
          const last = JSON.stringify(messagesOf(server.received[3]))
          assert.include(last, "not valid JSON")
          assert.include(last, "there is no tool named \\\"rm_rf\\\"")
        })
    ))

  it.live("ends as malformed_output when the model keeps calling unknown tools", () =>
    withKernel([call("nope", "{}"), call("nope", "{}"), call("nope", "{}")], {}, (server) =>
      Effect.gen(function*() {
        const result = yield* Runner.run({ goal: "g" })
        assert.strictEqual(result.reason, "malformed_output")
        assert.strictEqual(server.received.length, 3)
        assertAllValid(server)
      })))

  it.live("never executes a tool call cut off by the token limit", () =>
    withKernel(
      [Fake.completion({ toolCalls: [{ name: "write_note", arguments: "{\"text\":\"hi\"}" }], finishReason: "length" }), done],
      {},
      (server, { notes }) =>
        Effect.gen(function*() {
          const result = yield* Runner.run({ goal: "g" })
          assert.strictEqual(result.reason, "done")
          assert.deepStrictEqual(yield* Ref.get(notes), [])
          assert.include(JSON.stringify(messagesOf(server.received[1])), "cut off")
          assertAllValid(server)
        })
    ))

  // A server's content filter withholds an answer: a complete call in it is still never run.
  for (const stream of [false, true]) {
    it.live(`never executes a complete tool call in an answer a content filter stopped${stream ? " (streamed)" : ""}`, () =>
      withKernel(
        [
          stream
            ? { kind: "sse", events: Fake.streamed({ toolCalls: [{ id: "call_1", name: "write_note", arguments: "{\"text\":\"hi\"}" }], finishReason: "content_filter" }) }
            : Fake.completion({ toolCalls: [{ name: "write_note", arguments: "{\"text\":\"hi\"}" }], finishReason: "content_filter" }),
          done
        ],
        stream ? { stream: true } : {},
        (server, { notes }) =>
          Effect.gen(function*() {
            const result = yield* Runner.run({ goal: "g", goalId: "filtered" })
            assert.strictEqual(result.reason, "done")
            assert.deepStrictEqual(yield* Ref.get(notes), [])
            const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load("filtered"))
            assert.deepStrictEqual(events.filter((e) => e._tag === "ToolStarted"), [])
            const rejected = events.find((e) => e._tag === "ActionRejected")
            assert.strictEqual(rejected?._tag === "ActionRejected" ? rejected.kind : undefined, "cut_off")
            assert.include(JSON.stringify(messagesOf(server.received[1])), "content filter")
            assertAllValid(server)
          })
      ))
  }

  it.live("retries a 429 with Retry-After and a 503 within one model call", () =>
    withKernel(
      [Fake.error(429, "rate limited", { "retry-after": "0" }), Fake.error(503, "loading model"), done],
      {},
      (server) =>
        Effect.gen(function*() {
          const result = yield* Runner.run({ goal: "g" })
          assert.strictEqual(result.reason, "done")
          assert.strictEqual(server.received.length, 3)
          assertAllValid(server)
        })
    ))

  it.live("suspends the goal (open, model_unavailable) naming the server, status and message when retries run out", () =>
    withKernel([Fake.error(503, "busy"), Fake.error(503, "busy"), Fake.error(503, "still busy")], {}, (server) =>
      Effect.gen(function*() {
        const result = yield* Runner.run({ goal: "g" })
        assert.strictEqual(result.status, "suspended")
        assert.strictEqual(result.reason, "model_unavailable")
        assert.include(result.detail, server.baseUrl)
        assert.include(result.detail, "503")
        assert.include(result.detail, "still busy")
        assert.include(result.detail, "gave up after 3 attempts")
      })))

  it.live("ends as fatal_error at once on a 401, without retrying", () =>
    withKernel([Fake.error(401, "Incorrect API key provided")], {}, (server) =>
      Effect.gen(function*() {
        const result = yield* Runner.run({ goal: "g" })
        assert.strictEqual(result.reason, "fatal_error")
        assert.include(result.detail, "401")
        assert.include(result.detail, "Incorrect API key provided")
        assert.strictEqual(server.received.length, 1)
      })))

  it.live("suspends the goal when the server stalls past the idle timeout on every attempt", () =>
    withKernel([{ kind: "stall" }, { kind: "drop" }], { idleTimeoutMs: 150, retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 10 } }, (server) =>
      Effect.gen(function*() {
        const result = yield* Runner.run({ goal: "g" })
        assert.strictEqual(result.reason, "model_unavailable")
        assert.include(result.detail, "gave up after 2 attempts")
        assert.strictEqual(server.received.length, 2)
      })))

  it.live("after a shutdown inside a non-idempotent call (recorded `unknown`), resume goes on and the next request is still valid", () =>
    withKernel([call("deploy", "{\"target\":\"prod\"}"), done], {}, (server, { hanging }) =>
      Effect.gen(function*() {
        const goalId = "g-crash"
        const fiber = yield* Effect.fork(Runner.run({ goal: "deploy", goalId }))
        yield* Deferred.await(hanging)
        // rx is stopped while deploy runs: the call is recorded as unknown, and the goal waits, open.
        yield* Fiber.interrupt(fiber)
        const store = yield* StateStore.StateStore
        const cut = yield* store.load(goalId)
        assert.deepStrictEqual(cut.slice(-2).map((e) => e._tag), ["IterationCompleted", "Suspended"])

        const result = yield* Runner.resume(goalId)
        assert.strictEqual(result.reason, "done")
        const events = yield* store.load(goalId)
        const failed = events.find((event) => event._tag === "ToolFailed")
        assert.strictEqual(failed?._tag === "ToolFailed" ? failed.error.kind : undefined, "unknown")

        assert.strictEqual(server.received.length, 2)
        assertAllValid(server)
        const messages = messagesOf(server.received[1])
        const assistant = messages.find((m) => m.tool_calls !== undefined)
        const id = assistant?.tool_calls?.[0]?.id
        assert.strictEqual(assistant?.tool_calls?.[0]?.function.name, "deploy")
        const result_ = messages.find((m) => m.role === "tool")
        assert.strictEqual(result_?.tool_call_id, id)
        assert.include(result_?.content ?? "", "unknown")
      })))

  it.live("in JSON mode, runs the JSON action from the text and keeps the conversation valid without tool messages", () =>
    withKernel(
      [
        Fake.completion({ content: "{\"thought\":\"note it\",\"tool\":\"write_note\",\"input\":{\"text\":\"hi\"}}" }),
        Fake.completion({ content: "```json\n{\"tool\":\"done\",\"input\":{\"summary\":\"ok\"}}\n```" })
      ],
      { mode: "json" },
      (server, { notes }) =>
        Effect.gen(function*() {
          const result = yield* Runner.run({ goal: "write a note" })
          assert.strictEqual(result.reason, "done")
          assert.deepStrictEqual(yield* Ref.get(notes), ["hi"])
          assertAllValid(server)
          const messages = messagesOf(server.received[1])
          assert.isFalse(messages.some((m) => m.role === "tool" || m.tool_calls !== undefined))
          assert.isTrue(messages.some((m) => m.role === "assistant" && (m.content ?? "").includes("\"tool\":\"write_note\"")))
        })
    ))

  it.live("a tool_calls entry with no function is rejected alone and the model told; the valid entry beside it runs and the goal goes on", () =>
    withKernel(
      [
        {
          kind: "json",
          body: {
            choices: [{
              index: 0,
              message: {
                role: "assistant",
                content: null,
                tool_calls: [
                  { id: "call_a", type: "function" },
                  { id: "call_b", type: "function", function: { name: "write_note", arguments: "{\"text\":\"kept\"}" } }
                ]
              },
              finish_reason: "tool_calls"
            }]
          }
        },
        done
      ],
      { retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } },
      (server, { notes }) =>
        Effect.gen(function*() {
          const result = yield* Runner.run({ goal: "write a note" })
          // Before, the whole answer was refused as unusable and the goal suspended as model_unavailable.
          assert.strictEqual(result.status, "terminated")
          assert.strictEqual(result.reason, "done")
          assert.deepStrictEqual(yield* Ref.get(notes), ["kept"])
          assertAllValid(server)
          const next = JSON.stringify(messagesOf(server.received[1]))
          assert.include(next, "tool call 1 of your reply has no function name")
          const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(result.goalId))
          assert.isFalse(events.some((e) => e._tag === "ModelFailed" || e._tag === "Suspended"))
        })
    ))
})
