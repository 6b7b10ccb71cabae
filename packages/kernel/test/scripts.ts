/** Random scripted runs, for the property tests. */
import { Effect, FastCheck as fc, Layer, Ref } from "effect"
import { TestClock } from "effect"
import { Event, LanguageModel, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { echo, flaky, ledgerTool, recordingStore } from "./fixtures.js"

export type Move =
  | { readonly kind: "echo"; readonly text: string }
  | { readonly kind: "append"; readonly line: string }
  | { readonly kind: "flaky" | "fatal" | "badjson" | "unknown" | "invalid" | "text" | "cutoff" | "done" }

export const move: fc.Arbitrary<Move> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("a", "b", "c", "d", "e", "f").map((text): Move => ({ kind: "echo", text })) },
  { weight: 4, arbitrary: fc.constantFrom("x", "y", "z").map((line): Move => ({ kind: "append", line })) },
  { weight: 2, arbitrary: fc.constant<Move>({ kind: "flaky" }) },
  { weight: 1, arbitrary: fc.constantFrom<Move>({ kind: "badjson" }, { kind: "unknown" }, { kind: "invalid" }, { kind: "text" }, { kind: "cutoff" }) },
  { weight: 1, arbitrary: fc.constantFrom<Move>({ kind: "fatal" }, { kind: "done" }) }
)

export const script = fc.record({
  moves: fc.array(move, { minLength: 1, maxLength: 24 }),
  maxIterations: fc.integer({ min: 2, max: 30 })
})
export type Script = typeof script extends fc.Arbitrary<infer A> ? A : never

export const response = (m: Move): LanguageModel.Response => {
  switch (m.kind) {
    case "echo": return LanguageModel.callTool("echo", { text: m.text })
    case "append": return LanguageModel.callTool("append", { line: m.line })
    case "flaky": return LanguageModel.callTool("flaky", {})
    case "fatal": return LanguageModel.callTool("flaky", { fatal: true })
    case "badjson": return LanguageModel.callToolRaw("echo", "{\"text\": ")
    case "unknown": return LanguageModel.callTool("rm_rf", {})
    case "invalid": return LanguageModel.callTool("echo", { txt: 1 })
    case "text": return LanguageModel.text("Let me think about it.")
    case "cutoff": return LanguageModel.text("{\"tool\": \"echo\", \"inp", "length")
    case "done": return LanguageModel.done("finished")
  }
}

/** Each answer first moves the test clock, so events carry distinct times. */
export const steps = (moves: ReadonlyArray<Move>): ReadonlyArray<LanguageModel.Step> =>
  moves.map((m) => () => Effect.as(TestClock.adjust("7 millis"), response(m)))

export const goalId = "prop-goal"

/** Run a script on a fresh memory store: the log, the commit boundaries and the ledger. */
export const record = (s: Script) =>
  Effect.gen(function*() {
    const { boundaries, store } = yield* recordingStore
    const ledger = yield* Ref.make<ReadonlyArray<string>>([])
    const services = Layer.mergeAll(
      Layer.succeed(StateStore.StateStore, store),
      ToolRegistry.layer([echo, flaky, ledgerTool(ledger)]),
      LanguageModel.layerScripted(steps(s.moves))
    )
    const result = yield* Runner.run({ goal: "property", goalId, options: { maxIterations: s.maxIterations } }).pipe(Effect.provide(services))
    const events = yield* store.load(goalId)
    return { result, events, boundaries: [...boundaries], ledger: yield* Ref.get(ledger) }
  })

/**
 * Resume a log cut at `cut` events with the rest of the script. The ledger (the world outside)
 * keeps what completed calls wrote; the result's `ledger` holds only what the resumed run wrote.
 */
export const resumeCut = (s: Script, events: ReadonlyArray<Event.Event>, cut: number, written: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const store = yield* StateStore.makeMemory
    const prefix = events.slice(0, cut)
    yield* store.append(goalId, 0, prefix)
    const answered = prefix.filter((e) => e._tag === "ModelResponded").length
    const done = new Set(prefix.flatMap((e) => (e._tag === "ToolSucceeded" ? [e.callId] : [])))
    const before = written.filter((entry) => done.has(entry.slice(0, entry.lastIndexOf(":"))))
    const ledger = yield* Ref.make<ReadonlyArray<string>>(before)
    const services = Layer.mergeAll(
      Layer.succeed(StateStore.StateStore, store),
      ToolRegistry.layer([echo, flaky, ledgerTool(ledger)]),
      LanguageModel.layerScripted(steps(s.moves.slice(answered)))
    )
    const result = yield* Runner.resume(goalId).pipe(Effect.provide(services))
    return { result, events: yield* store.load(goalId), ledger: (yield* Ref.get(ledger)).slice(before.length) }
  })
