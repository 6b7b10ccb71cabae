import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"

/** A service a tool requires; each instance says who made it. */
class Greeter extends Context.Tag("test/Greeter")<Greeter, { readonly name: string }>() {}

const greet = Tool.make({
  name: "greet",
  description: "Says which Greeter it was given.",
  input: Schema.Struct({}),
  output: Schema.Struct({ by: Schema.String }),
  idempotent: true,
  execute: () => Effect.map(Greeter, (greeter) => ({ by: greeter.name }))
})

const call = { callId: "c1", tool: "greet", input: {} }

const outputOf = (registry: ToolRegistry.Service) =>
  Effect.flatMap(ToolRegistry.invoke(registry, call), (outcome) =>
    outcome._tag === "Success" ? Effect.succeed(outcome.output) : Effect.fail(outcome._tag === "Failure" ? outcome.error : outcome))

describe("ToolRegistry: the tools' context", () => {
  const registry = (name: string) => Effect.provideService(ToolRegistry.make([greet]), Greeter, { name })

  it.effect("a call sees the services the registry was built with, even where the caller holds others of the same tags", () =>
    Effect.gen(function*() {
      const built = yield* registry("the registry's")
      // No Greeter where the call is made, then another instance: both see the registry's.
      expect(yield* outputOf(built)).toEqual({ by: "the registry's" })
      expect(yield* outputOf(built).pipe(Effect.provideService(Greeter, { name: "the caller's" }))).toEqual({ by: "the registry's" })
      // The same instance where the call is made: the same answer.
      const same = { name: "shared" }
      const shared = yield* Effect.provideService(ToolRegistry.make([greet]), Greeter, same)
      expect(yield* outputOf(shared).pipe(Effect.provideService(Greeter, same))).toEqual({ by: "shared" })
      // And alternating between contexts, each call still sees the registry's.
      for (const name of ["a", "b", "a"]) {
        expect(yield* outputOf(built).pipe(Effect.provideService(Greeter, { name }))).toEqual({ by: "the registry's" })
      }
    }))

  it.effect("in a run, the tools get the registry's Layer's services, not the runner's", () =>
    Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "greet", goalId: "g-greet" }).pipe(Effect.provideService(Greeter, { name: "the runner's" }))
      expect(result.reason).toBe("done")
      const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load("g-greet"))
      expect(events.find((e) => e._tag === "ToolSucceeded")).toMatchObject({ output: { by: "the registry's Layer" } })
    }).pipe(
      Effect.provide(Layer.mergeAll(
        ToolRegistry.layer([greet]).pipe(Layer.provide(Layer.succeed(Greeter, { name: "the registry's Layer" }))),
        LanguageModel.layerScripted([LanguageModel.callTool("greet", {}), LanguageModel.done("greeted")]),
        StateStore.layerMemory
      ))
    ))
})
