import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer } from "effect"
import { Event, LanguageModel, Prompt, Replay, Runner, State, StateStore, ToolRegistry } from "@rx/kernel"
import { fingerprint } from "../src/internal/json.js"
import { echo, recordingStore } from "./fixtures.js"

/**
 * A model whose answer is a function of the request alone, so a resumed run asks and gets what
 * the uninterrupted one did: a summary request (plain text, no tools) gets a summary naming the
 * steps it was shown; any other request gets an echo of a text derived from the request.
 */
const answer = (summaryLength = 200) => (request: LanguageModel.Request): LanguageModel.Response => {
  const content = request.messages.map((m) => m.content).join("|")
  if (request.format === "text") {
    const steps = [...content.matchAll(/Step (\d+):/g)].map((m) => m[1])
    return { ...LanguageModel.text(`summary of steps ${steps[0]} to ${steps.at(-1)}: `.padEnd(summaryLength, "s")), usage: { inputTokens: 10, outputTokens: 5 } }
  }
  return { ...LanguageModel.callTool("echo", { text: `${fingerprint(content)}:`.padEnd(400, "x") }), usage: { inputTokens: 1, outputTokens: 1 } }
}

const summaries = (events: ReadonlyArray<Event.Event>) => events.filter((e): e is Event.Of<"TurnsSummarised"> => e._tag === "TurnsSummarised")

/** The summaries cover consecutive ranges, each once. */
const contiguous = (events: ReadonlyArray<Event.Event>) => {
  let through = 0
  for (const s of summaries(events)) {
    if (s.from !== through + 1 || s.to < s.from) return false
    through = s.to
  }
  return true
}

const services = (model: Layer.Layer<LanguageModel.LanguageModel>) => Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([echo]), model)

describe("compaction", () => {
  it.effect("a 300-iteration goal on a small budget: summaries recorded before use, shown in later prompts, every prompt within budget and flat", () => {
    const budget = 4_000
    const requests: Array<LanguageModel.Request> = []
    const model = LanguageModel.layerFunction((request) => {
      requests.push(request)
      return answer()(request)
    })
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "go on", goalId: "long", options: { maxIterations: 300, promptBudget: budget } })
      expect(result.reason).toBe("max_iterations")
      const events = yield* StateStore.StateStore.pipe(Effect.flatMap((store) => store.load("long")))
      const recorded = summaries(events)
      expect(recorded.length).toBeGreaterThan(10)
      expect(contiguous(events)).toBe(true)
      // One summary request per summary, plain text and no tools; every other request asks for an action.
      const asked = requests.filter((r) => r.format === "text")
      expect(asked).toHaveLength(recorded.length)
      for (const r of asked) expect(r.tools).toEqual([])
      const actions = requests.filter((r) => r.format === undefined)
      expect(actions).toHaveLength(300)
      // Every prompt within budget; no step only counted; the size late in the run no larger than early on.
      const sizes = requests.map(Prompt.size)
      expect(Math.max(...sizes)).toBeLessThanOrEqual(budget)
      for (const r of actions) expect(r.messages[0]?.content).not.toMatch(/earlier steps are not shown/)
      expect(Math.max(...actions.slice(250).map(Prompt.size))).toBeLessThanOrEqual(Math.max(...actions.slice(0, 50).map(Prompt.size)) + Prompt.maxSummaryChars({ promptBudget: budget }))
      // Each summary is in the prompt right after it, and the next summary request carries it.
      for (const s of recorded) {
        const next = requests[requests.indexOf(asked[recorded.indexOf(s)] as LanguageModel.Request) + 1]
        expect(next?.messages[0]?.content).toContain(s.text)
      }
      expect(asked[1]?.messages[0]?.content).toContain(recorded[0]?.text)
      // A summary's tokens count toward the goal's.
      const tokens = recorded.reduce((n, s) => n + s.usage.inputTokens + s.usage.outputTokens, 0) + 300 * 2
      expect(result.state.usage.inputTokens + result.state.usage.outputTokens).toBe(tokens)
      // The prompts rebuilt from the log are the ones sent.
      const rebuilt = events.flatMap((e, i) => {
        if (e._tag !== "ModelResponded" && e._tag !== "TurnsSummarised") return []
        const next = Prompt.next(State.fromEvents("long", events.slice(0, i)))
        return [JSON.stringify(next.request)]
      })
      expect(rebuilt).toEqual(requests.map((r) => JSON.stringify(r)))
      // Replay reads the recorded summaries: no live call.
      expect((yield* Replay.verify(events)).reason).toBe("max_iterations")
    }).pipe(Effect.provide(services(model)))
  }, 120_000)

  it.effect("a summary longer than its cap is cut with a marker and recorded as cut", () =>
    Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "go on", goalId: "cut", options: { maxIterations: 40, promptBudget: 2_000 } })
      const [first] = summaries(result.state.seq > 0 ? yield* StateStore.StateStore.pipe(Effect.flatMap((s) => s.load("cut"))) : [])
      expect(first?.cut).toBe(true)
      expect(first?.text.length).toBeLessThanOrEqual(Prompt.maxSummaryChars({ promptBudget: 2_000 }))
      expect(first?.text).toContain("characters omitted")
    }).pipe(Effect.provide(services(LanguageModel.layerFunction(answer(5_000))))))

  it.effect("a refused summary does not stop the goal: recorded as failed, the prompt counts those steps", () => {
    const requests: Array<LanguageModel.Request> = []
    const model = Layer.succeed(LanguageModel.LanguageModel, {
      generate: (request) => {
        requests.push(request)
        return request.format === "text"
          ? Effect.fail(new LanguageModel.ModelError({ message: "400: no", status: 400 }))
          : Effect.succeed(answer()(request))
      }
    })
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "go on", goalId: "refused", options: { maxIterations: 40, promptBudget: 2_000 } })
      expect(result.reason).toBe("max_iterations")
      const events = yield* StateStore.StateStore.pipe(Effect.flatMap((s) => s.load("refused")))
      const recorded = summaries(events)
      expect(recorded.length).toBeGreaterThan(0)
      expect(recorded.every((s) => s.failed === "400: no" && s.text === "")).toBe(true)
      expect(contiguous(events)).toBe(true)
      expect(requests.at(-1)?.messages[0]?.content).toMatch(/\d+ earlier steps are not shown/)
      expect((yield* Replay.verify(events)).reason).toBe("max_iterations")
    }).pipe(Effect.provide(services(model)))
  })

  it.effect("a model outage while summarising suspends the goal; the resume asks again, and the range is summarised once", () => {
    let down = true
    let asked = 0
    const model = Layer.succeed(LanguageModel.LanguageModel, {
      generate: (request) => {
        if (request.format === "text") asked++
        return request.format === "text" && down
          ? Effect.fail(new LanguageModel.ModelError({ message: "503: busy", status: 503 }))
          : Effect.succeed(answer()(request))
      }
    })
    return Effect.gen(function*() {
      const first = yield* Runner.run({ goal: "go on", goalId: "outage", options: { maxIterations: 30, promptBudget: 2_000 } })
      expect(first.status).toBe("suspended")
      expect(first.reason).toBe("model_unavailable")
      down = false
      const second = yield* Runner.resume("outage")
      expect(second.reason).toBe("max_iterations")
      const events = yield* StateStore.StateStore.pipe(Effect.flatMap((s) => s.load("outage")))
      expect(contiguous(events)).toBe(true)
      expect(asked).toBe(summaries(events).length + 1)
      expect((yield* Replay.verify(events)).reason).toBe("max_iterations")
    }).pipe(Effect.provide(services(model)))
  })

  it.effect("a summary's tokens count toward the token budget", () =>
    Effect.gen(function*() {
      const expensive = (request: LanguageModel.Request) =>
        request.format === "text" ? { ...answer()(request), usage: { inputTokens: 10_000, outputTokens: 0 } } : answer()(request)
      const result = yield* Runner.run({ goal: "go on", goalId: "tokens", options: { maxIterations: 100, promptBudget: 2_000, maxTotalTokens: 5_000 } }).pipe(
        Effect.provide(services(LanguageModel.layerFunction(expensive)))
      )
      expect(result.reason).toBe("token_budget")
      expect(result.iterations).toBeLessThan(40)
    }))

  it.effect("off with compact: false, and for goals of an older behaviour: the oldest steps are only counted", () =>
    Effect.gen(function*() {
      for (const [goalId, extra] of [["off", { options: { compact: false } }], ["old", { behaviour: 4 }]] as const) {
        const options = { maxIterations: 40, promptBudget: 2_000, ...("options" in extra ? extra.options : {}) }
        yield* Runner.run({ goal: "go on", goalId, options, ...("behaviour" in extra ? { behaviour: extra.behaviour } : {}) })
        const events = yield* StateStore.StateStore.pipe(Effect.flatMap((s) => s.load(goalId)))
        expect(summaries(events)).toHaveLength(0)
        expect(Prompt.build(State.fromEvents(goalId, events)).messages[0]?.content).toMatch(/earlier steps are not shown/)
      }
    }).pipe(Effect.provide(services(LanguageModel.layerFunction(answer())))))

  it.effect.prop(
    "a goal killed at any commit (mid-summary included) and resumed ends as the uninterrupted one: no range summarised twice, replay identical",
    [fc.integer({ min: 20, max: 70 }), fc.constantFrom(2_000, 3_000), fc.infiniteStream(fc.nat())],
    ([maxIterations, promptBudget, picks]) =>
      Effect.gen(function*() {
        const options = { maxIterations, promptBudget }
        const { boundaries, store } = yield* recordingStore
        const model = LanguageModel.layerFunction(answer())
        const layer = (s: StateStore.Service) => Layer.mergeAll(Layer.succeed(StateStore.StateStore, s), ToolRegistry.layer([echo]), model)
        yield* Runner.run({ goal: "go on", goalId: "kill", options }).pipe(Effect.provide(layer(store)))
        const full = yield* store.load("kill")
        expect(summaries(full).length).toBeGreaterThan(0)
        // Cuts before each summary (the process died while it was asked) and some others.
        const beforeSummary = full.flatMap((e) => (e._tag === "TurnsSummarised" ? [e.seq] : []))
        const others = boundaries.filter((b) => b < full.length)
        const cuts = [...beforeSummary, ...others.filter((_, i) => i % 7 === (picks.next().value ?? 0) % 7)]
        for (const cut of cuts) {
          const resumedStore = yield* StateStore.makeMemory
          yield* resumedStore.append("kill", 0, full.slice(0, cut))
          let result = yield* Runner.resume("kill").pipe(Effect.provide(layer(resumedStore)))
          while (result.status === "suspended") result = yield* Runner.resume("kill").pipe(Effect.provide(layer(resumedStore)))
          const events = yield* resumedStore.load("kill")
          expect(events.map((e) => e._tag)).toEqual(full.map((e) => e._tag))
          expect(summaries(events).map((s) => [s.from, s.to])).toEqual(summaries(full).map((s) => [s.from, s.to]))
          expect(contiguous(events)).toBe(true)
          expect((yield* Replay.verify(events)).reason).toBe("max_iterations")
        }
      }),
    { fastCheck: { numRuns: 5 } }
  )
})
