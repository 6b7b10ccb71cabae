/**
 * The tools a run may call, by name. The kernel validates an action with `decode` before it
 * records `ToolStarted`, then calls `invoke`, which never fails: errors become outcomes.
 */
import { Context, Effect, Either, Layer, Option, Schema } from "effect"
import * as Tool from "./Tool.js"

/** The name of the kernel's own action that ends a run; no tool may take it. */
export const doneName = "done"

/** The `done` action as the model sees it. */
export const doneSpec: Tool.Spec = {
  name: doneName,
  description: "Finish the goal. Call this once the goal is achieved, or when it cannot be achieved, with a short summary of the result.",
  parameters: {
    type: "object",
    required: ["summary"],
    properties: { summary: { type: "string", description: "What was done, or why it cannot be done." } },
    additionalProperties: false
  },
  idempotent: true
}

/** The input of `done`. */
export const DoneInput = Schema.Struct({ summary: Schema.String })

/** A set of tools that cannot form a registry: a duplicate, reserved or invalid name. */
export class InvalidToolset extends Schema.TaggedError<InvalidToolset>()("@rx/kernel/InvalidToolset", {
  message: Schema.String
}) {}

/** A call its tool accepted, ready to run: the runner holds it from `ToolStarted` to the outcome. */
export interface Prepared {
  readonly call: Tool.Call
  /** Run the call; never fails: errors are outcomes. */
  readonly run: Effect.Effect<Tool.Outcome>
  /** After rx stopped during the call: its outcome if the tool can tell for certain, else `None`. */
  readonly recover: Effect.Effect<Option.Option<Tool.Outcome>>
}

export interface Service {
  /** What the model is told, in a stable order. */
  readonly specs: ReadonlyArray<Tool.Spec>
  /** Check a call against its tool's Schema; `Left` is a reason the model can act on. */
  readonly prepare: (call: Tool.Call) => Either.Either<Prepared, string>
}

export class ToolRegistry extends Context.Tag("@rx/kernel/ToolRegistry")<ToolRegistry, Service>() {}

/** Prepare and run a call in one step; a refused input is a recoverable failure. */
export const invoke = (registry: Service, call: Tool.Call): Effect.Effect<Tool.Outcome> =>
  Either.match(registry.prepare(call), {
    onLeft: (reason) =>
      Effect.succeed(Tool.failure(
        "recoverable",
        registry.specs.some((spec) => spec.name === call.tool) ? `invalid input for ${call.tool}: ${reason}` : reason
      )),
    onRight: (prepared) => prepared.run
  })

/** A registry over a list of tools; each call runs with the context the tools require. */
export const make = <const Tools extends ReadonlyArray<Tool.Any>>(
  tools: Tools
): Effect.Effect<Service, InvalidToolset, Tool.Requirements<Tools>> =>
  Effect.gen(function*() {
    type R = Tool.Requirements<Tools>
    const byName = new Map<string, Tool.Tool<R>>()
    for (const tool of tools) {
      const name = tool.spec.name
      if (!Tool.namePattern.test(name)) {
        return yield* new InvalidToolset({ message: `tool name "${name}" is invalid: use 1-64 letters, digits, "_" or "-"` })
      }
      if (name === doneName) {
        return yield* new InvalidToolset({ message: `"${doneName}" is the kernel's own action; give the tool another name` })
      }
      if (byName.has(name)) {
        return yield* new InvalidToolset({ message: `two tools are named "${name}"` })
      }
      // Each tool requires part of R, by the definition of Requirements.
      byName.set(name, tool as Tool.Tool<R>)
    }
    const context = yield* Effect.context<R>()
    // Effect's own layer-building reference is in the context a Layer builds in; no tool requires it.
    const services: ReadonlyArray<readonly [string, unknown]> = [...context.unsafeMap].filter(([key]) => key !== "effect/Layer/CurrentMemoMap")
    /** Whether `current` holds every service of the tools' context, the same instances. */
    const covers = (current: Context.Context<never>) => services.every(([key, service]) => current.unsafeMap.get(key) === service)
    let seen: Context.Context<never> | undefined
    let covered = false
    // Providing a context costs about a dozen steps per call. A call made where every service of
    // the tools' context is already in place, the same instances, runs as is: the tools look up
    // nothing else (R is all they require), so what they see is the same. The check is made once
    // per context the calls are made in.
    const withContext = <A>(effect: Effect.Effect<A, never, R>): Effect.Effect<A> =>
      services.length === 0 ? effect as Effect.Effect<A> : Effect.contextWithEffect((current: Context.Context<never>) => {
        if (current !== seen) {
          seen = current
          covered = covers(current)
        }
        return covered ? effect as Effect.Effect<A> : Effect.provide(effect, context)
      })
    return {
      specs: tools.map((tool) => tool.spec),
      prepare: (call) => {
        const tool = byName.get(call.tool)
        if (tool === undefined) {
          return Either.left(`there is no tool named "${call.tool}"; available: ${[...byName.keys(), doneName].join(", ")}`)
        }
        return Either.map(tool.decode(call.input), (input): Prepared => {
          const context = call.goalId === undefined ? { callId: call.callId } : { callId: call.callId, goalId: call.goalId }
          return { call, run: withContext(tool.run(input, context)), recover: withContext(tool.recover(input, context)) }
        })
      }
    }
  })

/** The registry as a Layer. */
export const layer = <const Tools extends ReadonlyArray<Tool.Any>>(
  tools: Tools
): Layer.Layer<ToolRegistry, InvalidToolset, Tool.Requirements<Tools>> => Layer.effect(ToolRegistry, make(tools))
