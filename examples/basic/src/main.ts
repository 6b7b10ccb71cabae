/**
 * A user's first rx program: one custom tool, a scripted model, the memory store. It runs a
 * goal, prints every event as it is committed, then replays the log to prove it reproduces.
 *
 *   pnpm --filter @rx/example-basic start
 */
import { Effect, Layer, Schema } from "effect"
import { Event, LanguageModel, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"

/** A custom tool: pure, so it is honestly idempotent. */
const wordCount = Tool.make({
  name: "word_count",
  description: "Count the words in a text.",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ words: Schema.Number }),
  idempotent: true,
  execute: ({ text }) => Effect.succeed({ words: text.split(/\s+/).filter((w) => w.length > 0).length })
})

/** A model that answers from a script: the same run every time, no server needed. */
const model = LanguageModel.layerScripted([
  LanguageModel.callTool("word_count", { text: "the log is the only truth" }),
  LanguageModel.done("The text has 6 words.")
])

const program = Effect.gen(function*() {
  const result = yield* Runner.run({
    goal: "How many words are in 'the log is the only truth'?",
    options: { maxIterations: 5 },
    observe: (event) => Effect.sync(() => console.log(Event.encodeJson(event)))
  })
  console.log(`\nterminated: ${result.reason} after ${result.iterations} iterations: ${result.detail}`)

  const store = yield* StateStore.StateStore
  const replayed = yield* Replay.verify(yield* store.load(result.goalId))
  console.log(`replay: identical (${replayed.reason}, no live calls)`)
})

program.pipe(
  Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([wordCount]), model)),
  Effect.runPromise
).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
