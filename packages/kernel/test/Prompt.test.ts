import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer } from "effect"
import { LanguageModel, Prompt, Runner, State, StateStore, ToolRegistry } from "@rx/kernel"
import { echo, eventsOf } from "./fixtures.js"

/** Every assistant tool call is answered by the next message, a tool result with its id. */
const apiValid = (request: LanguageModel.Request): boolean =>
  request.messages.every((message, i) => {
    if (message.role === "tool") {
      const previous = request.messages[i - 1]
      return previous?.role === "assistant" && previous.toolCalls.some((c) => c.id === message.toolCallId)
    }
    if (message.role !== "assistant" || message.toolCalls.length === 0) return true
    const next = request.messages[i + 1]
    return message.toolCalls.every((call) => next?.role === "tool" && next.toolCallId === call.id)
  }) && request.messages[0]?.role === "user"

describe("Prompt.build", () => {
  it.effect.prop(
    "turns rendered as they age (each level once, reused where nothing is cut) give the request a fresh fold gives",
    [
      fc.array(fc.oneof(fc.nat({ max: 200 }), fc.integer({ min: 250, max: 1_800 }), fc.integer({ min: 1_800, max: 12_000 })), { minLength: 1, maxLength: 14 }),
      // Budgets whose newest turns are cut harder than older ones (a quarter of 5,000 is under 1,500) and the usual one.
      fc.constantFrom(2_000, 5_000, 8_000, 32_000)
    ],
    ([sizes, promptBudget]) => {
      const requests: Array<string> = []
      // Each answer echoes a text of the drawn size: outputs and inputs cut at some levels and not others.
      const steps = sizes.map((size, i): LanguageModel.Step => (request) =>
        Effect.sync(() => {
          requests.push(JSON.stringify(request))
          return LanguageModel.callTool("echo", { text: `${i}:`.padEnd(size, "x") })
        }))
      const goalId = `cache-${sizes.join("-")}-${promptBudget}`
      return Effect.gen(function*() {
        yield* Runner.run({ goal: "echo", goalId, options: { maxIterations: sizes.length, promptBudget, compact: false } })
        const events = yield* eventsOf(goalId)
        const rebuilt = events.flatMap((e, i) =>
          e._tag === "ModelResponded" ? [JSON.stringify(Prompt.build(State.fromEvents(goalId, events.slice(0, i))))] : []
        )
        expect(rebuilt).toEqual(requests)
      }).pipe(Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([echo]), LanguageModel.layerScripted(steps))))
    },
    { fastCheck: { numRuns: 120, examples: [[[251, 250, 0, 1_800], 2_000], [[1_300, 40, 1_400, 10, 20], 5_000]] } }
  )

  it.effect("the same State gives a byte-identical request, however the State was reached", () => {
    const requests: Array<string> = []
    const answer = (text: string): LanguageModel.Step => (request) =>
      Effect.sync(() => {
        requests.push(JSON.stringify(request))
        return LanguageModel.callTool("echo", { text })
      })
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "build it", goalId: "p1", options: { maxIterations: 4 } })
      const events = yield* eventsOf("p1")
      // Rebuild each request from a fresh fold of the log up to the model call.
      const rebuilt = events.flatMap((e, i) =>
        e._tag === "ModelResponded" ? [JSON.stringify(Prompt.build(State.fromEvents("p1", events.slice(0, i))))] : []
      )
      expect(rebuilt).toEqual(requests)
      expect(JSON.stringify(Prompt.build(result.state))).toBe(JSON.stringify(Prompt.build(State.fromEvents("p1", events))))
    }).pipe(Effect.provide(Layer.mergeAll(
      StateStore.layerMemory,
      ToolRegistry.layer([echo]),
      LanguageModel.layerScripted([answer("a"), answer("b"), answer("c"), answer("d")])
    )))
  })

  it.effect("a 10,000-iteration run without compaction keeps every request under the budget and API-valid", () => {
    const budget = 12_000
    let largest = 0
    let invalid = 0
    let last: LanguageModel.Request | undefined
    const model = LanguageModel.layerFunction((request, index) => {
      largest = Math.max(largest, Prompt.size(request))
      if (!apiValid(request)) invalid++
      last = request
      // Large, ever-different outputs: the worst case for prompt growth.
      return LanguageModel.callTool("echo", { text: `${index}:`.padEnd(3_000 + (index % 7) * 500, "x") })
    })
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "go on", goalId: "p2", options: { maxIterations: 10_000, promptBudget: budget, compact: false } })
      expect(result.reason).toBe("max_iterations")
      expect(result.iterations).toBe(10_000)
      expect(largest).toBeLessThanOrEqual(budget)
      expect(largest).toBeGreaterThan(budget / 2)
      expect(invalid).toBe(0)
      expect(last?.messages[0]?.content).toMatch(/\d+ earlier steps are not shown/)
      // The newest output is shown, with its head and tail.
      const newest = last?.messages.at(-1)?.content ?? ""
      expect(newest).toContain("9998:")
    }).pipe(Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([echo]), model)))
  }, 120_000)

  it("a rejected answer is shown as text plus the reason, never as an unanswered tool call", () => {
    const base = { goalId: "g", at: 0 }
    const state = State.fromEvents("g", [
      { ...base, _tag: "GoalSubmitted", seq: 0, iteration: 0, goal: "g", options: State.empty("g").options, tools: [], behaviour: 2 },
      { ...base, _tag: "ModelResponded", seq: 1, iteration: 1, response: LanguageModel.callToolRaw("echo", "{bad") },
      { ...base, _tag: "ActionRejected", seq: 2, iteration: 1, kind: "bad_json", reason: "not JSON", raw: "{bad" }
    ])
    const request = Prompt.build(state)
    expect(apiValid(request)).toBe(true)
    expect(request.messages.slice(1)).toEqual([
      { role: "assistant", content: "(no text)", toolCalls: [] },
      { role: "user", content: "Your reply was not executed: not JSON" }
    ])
    expect(request.tools.map((t) => t.name)).toEqual(["done"])
  })
})

describe("a changed prompt budget", () => {
  it.effect("a request after a budget change is the one a fresh fold of the same log gives", () =>
    Effect.gen(function*() {
      const steps = [0, 1, 2].map((i): LanguageModel.Step => () => Effect.succeed(LanguageModel.callTool("echo", { text: `${i}:`.padEnd(3_000, "x") })))
      yield* Runner.run({ goal: "echo", goalId: "budget", options: { maxIterations: 3, promptBudget: 32_000 } }).pipe(
        Effect.provide(Layer.mergeAll(ToolRegistry.layer([echo]), LanguageModel.layerScripted(steps)))
      )
      const events = yield* eventsOf("budget")
      const before = State.fromEvents("budget", events)
      // Rendered under the first budget: each turn's rendering is cached.
      Prompt.build(before)
      const last = events[events.length - 1]
      const changed = {
        _tag: "OptionsChanged" as const,
        goalId: "budget",
        seq: events.length,
        iteration: last?.iteration ?? 0,
        at: (last?.at ?? 0) + 1,
        options: { ...before.options, promptBudget: 4_000 }
      }
      const live = Prompt.build(State.reduce(before, changed))
      const fresh = Prompt.build(State.fromEvents("budget", [...events, changed]))
      expect(JSON.stringify(live)).toBe(JSON.stringify(fresh))
      expect(JSON.stringify(fresh).length).toBeLessThan(JSON.stringify(Prompt.build(before)).length)
    }).pipe(Effect.provide(StateStore.layerMemory)))
})
