import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema } from "effect"
import { Control, Event, LanguageModel, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { echo } from "./fixtures.js"

/** How many times `text` occurs in a request's messages. */
const occurrences = (request: LanguageModel.Request, text: string) =>
  request.messages.filter((m) => m.content.includes(text)).length

describe("messages into a running goal", () => {
  it.effect("a message sent while a call runs is shown at the next request, once, in order, and replays identically", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const slow = Tool.make({
        name: "slow",
        description: "Waits.",
        input: Schema.Struct({}),
        output: Schema.Struct({ ok: Schema.Boolean }),
        idempotent: false,
        execute: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.as(Deferred.await(gate), { ok: true }))
      })
      const requests: Array<LanguageModel.Request> = []
      const answers = [LanguageModel.callTool("slow", {}), LanguageModel.callTool("echo", { text: "a" }), LanguageModel.callTool("echo", { text: "b" }), LanguageModel.done("ok")]
      const model = Layer.succeed(LanguageModel.LanguageModel, {
        generate: (request) =>
          Effect.sync(() => {
            requests.push(request)
            return answers[requests.length - 1] ?? LanguageModel.done("ok")
          })
      })
      const store = yield* StateStore.makeMemory
      const layer = Layer.mergeAll(Layer.succeed(StateStore.StateStore, store), ToolRegistry.layer([echo, slow]), model)
      const fiber = yield* Effect.fork(Runner.run({ goal: "work", goalId: "m1" }).pipe(Effect.provide(layer)))
      yield* Deferred.await(started)
      // Another process (here: another caller of the same store) sends two messages while the call runs.
      const other = Layer.succeed(StateStore.StateStore, store)
      yield* Control.say("m1", { by: "ann", text: "use the blue folder" }).pipe(Effect.provide(other))
      yield* Control.say("m1", { by: "bob", text: "and stop touching tests" }).pipe(Effect.provide(other))
      expect(requests).toHaveLength(1)
      yield* Deferred.succeed(gate, undefined)
      const result = yield* Fiber.join(fiber)
      expect(result.reason).toBe("done")
      // The call ran to its end; the next request shows both messages, in order, after its result.
      const [first, second, third] = requests
      expect(first && occurrences(first, "blue folder")).toBe(0)
      expect(second?.messages.slice(-2).map((m) => m.content)).toEqual([
        "Message from ann while you work:\nuse the blue folder",
        "Message from bob while you work:\nand stop touching tests"
      ])
      expect(second?.messages.at(-3)?.role).toBe("tool")
      // Later requests show each once, before the answer that followed it.
      expect(third && occurrences(third, "blue folder")).toBe(1)
      expect(third?.messages.at(-1)?.role).toBe("tool")
      const events = yield* store.load("m1")
      const responded = events.filter((e): e is Event.Of<"ModelResponded"> => e._tag === "ModelResponded")
      expect(responded.map((e) => e.heard)).toEqual([undefined, 2, undefined, undefined])
      expect(events.filter((e) => e._tag === "MessageSent").map((e) => e.seq)).toEqual([3, 4])
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))

  it.effect("a message to a suspended goal waits for its resume; one to an ended goal is refused, pointing to --continue", () =>
    Effect.gen(function*() {
      let up = false
      const requests: Array<LanguageModel.Request> = []
      const model = Layer.succeed(LanguageModel.LanguageModel, {
        generate: (request) => {
          if (!up) return Effect.fail(new LanguageModel.ModelError({ message: "unreachable", status: 503 }))
          requests.push(request)
          return Effect.succeed(LanguageModel.done("ok"))
        }
      })
      const layer = Layer.mergeAll(ToolRegistry.layer([echo]), model)
      const first = yield* Runner.run({ goal: "work", goalId: "m2" }).pipe(Effect.provide(layer))
      expect(first.status).toBe("suspended")
      yield* Control.say("m2", { by: "ann", text: "the blue folder" })
      up = true
      const second = yield* Runner.resume("m2").pipe(Effect.provide(layer))
      expect(second.reason).toBe("done")
      expect(requests[0]?.messages.at(-1)?.content).toContain("the blue folder")
      const refused = yield* Effect.flip(Control.say("m2", { by: "ann", text: "more" }))
      expect(refused._tag).toBe("@rx/kernel/MessageRefused")
      expect(refused.message).toContain("rx run --continue m2")
      const events = yield* Effect.flatMap(StateStore.StateStore, (s) => s.load("m2"))
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))
})
