import { Effect, Layer, Ref, Schema } from "effect"
import { Event, LanguageModel, Options, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"

/** Echoes its input: idempotent, always succeeds. */
export const echo = Tool.echo

/** Fails recoverably, or fatally when asked. */
export const flaky = Tool.make({
  name: "flaky",
  description: "Always fails.",
  input: Schema.Struct({ fatal: Schema.optional(Schema.Boolean) }),
  output: Schema.Struct({}),
  idempotent: true,
  execute: ({ fatal }) =>
    Effect.fail(fatal === true ? Tool.ToolError.fatal("the disk is gone") : Tool.ToolError.recoverable("file not found: a.txt"))
})

/** A non-idempotent tool that records each run in a ledger. */
export const ledgerTool = (ledger: Ref.Ref<ReadonlyArray<string>>) =>
  Tool.make({
    name: "append",
    description: "Append a line to the ledger.",
    input: Schema.Struct({ line: Schema.String }),
    output: Schema.Struct({ lines: Schema.Number }),
    idempotent: false,
    execute: ({ line }, { callId }) =>
      Ref.updateAndGet(ledger, (lines) => [...lines, `${callId}:${line}`]).pipe(Effect.map((lines) => ({ lines: lines.length })))
  })

/** Layers for a run: a fresh memory store, the given tools and a scripted model. */
export const layers = (
  steps: ReadonlyArray<LanguageModel.Step>,
  tools: ReadonlyArray<Tool.Tool<never>> = [echo, flaky]
) =>
  Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer(tools), LanguageModel.layerScripted(steps))

/** The events of a goal. */
export const eventsOf = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

export const tags = (events: ReadonlyArray<Event.Event>) => events.map((e) => e._tag)

/** Run a goal and return its result and log. */
export const runGoal = (goal: string, options: Options.Input = {}) =>
  Effect.gen(function*() {
    const result = yield* Runner.run({ goal, options, goalId: "g1" })
    return { result, events: yield* eventsOf(result.goalId) }
  })

/** Exactly one Terminated, and it is last. */
export const endsOnce = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e) => e._tag === "Terminated").length === 1 && events[events.length - 1]?._tag === "Terminated"

/** A memory store that also records where each commit ended (the points a crash can leave). */
export const recordingStore = Effect.gen(function*() {
  const inner = yield* StateStore.makeMemory
  const boundaries: Array<number> = []
  const store = StateStore.StateStore.of({
    ...inner,
    append: (goalId, expectedSeq, events) =>
      Effect.tap(inner.append(goalId, expectedSeq, events), () => Effect.sync(() => boundaries.push(expectedSeq + events.length)))
  })
  return { store, boundaries }
})
