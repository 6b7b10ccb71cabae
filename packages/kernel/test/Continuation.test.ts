import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Continuation, Event, LanguageModel, Replay, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { echo } from "./fixtures.js"

const log = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

describe("continuing a goal that ended", () => {
  it.effect("a chain of three: each link names the goal it continues and starts from what it did; old logs unchanged; each replays with no live call", () => {
    const requests: Array<LanguageModel.Request> = []
    let n = 0
    const model = LanguageModel.layerFunction((request) => {
      requests.push(request)
      return LanguageModel.callTool("echo", { text: `result ${n++}` })
    })
    return Effect.gen(function*() {
      const a = yield* Runner.run({ goal: "build the thing", goalId: "a", options: { maxIterations: 3 } })
      expect(a.reason).toBe("max_iterations")
      const before = (yield* log("a")).map(Event.encodeJson)
      const b = yield* Continuation.submit({ goalId: "a", text: "finish the tests", newGoalId: "b", options: { maxIterations: 2 } })
      const asked = requests.length
      expect((yield* Runner.resume(b)).reason).toBe("max_iterations")
      const first = requests[asked]?.messages[0]?.content ?? ""
      expect(first).toContain("Goal:\nbuild the thing")
      expect(first).toContain("This goal continues goal a, which ended (max_iterations: reached the limit of 3 iterations)")
      expect(first).toContain("result 2")
      expect(first).toContain("Your new instruction:\nfinish the tests")
      const c = yield* Continuation.submit({ goalId: "b", newGoalId: "c", options: { maxIterations: 1 } })
      expect((yield* Runner.resume(c)).reason).toBe("max_iterations")
      const third = requests.at(-1)?.messages[0]?.content ?? ""
      expect(third).toContain("This goal continues goal b")
      expect(third).toContain("(It continued goal a:")
      expect(third).toContain("Your new instruction:\ncontinue")
      // The ended logs stay as they were; the links are read from the new goals' first events.
      expect((yield* log("a")).map(Event.encodeJson)).toEqual(before)
      const submitted = (goalId: string) => Effect.map(log(goalId), (events) => events[0] as Event.Of<"GoalSubmitted">)
      expect((yield* submitted("b")).continues?.goalId).toBe("a")
      expect((yield* submitted("c")).continues?.goalId).toBe("b")
      expect(yield* Continuation.continuedBy("a")).toEqual(["b"])
      expect(yield* Continuation.continuedBy("b")).toEqual(["c"])
      expect(yield* Continuation.continuedBy("c")).toEqual([])
      // Replay of each link: from its own log, no live call.
      const live = requests.length
      for (const goalId of ["a", "b", "c"]) expect((yield* Replay.verify(yield* log(goalId))).reason).toBe("max_iterations")
      expect(requests.length).toBe(live)
    }).pipe(Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([echo]), model)))
  })

  it.effect("a goal that has not ended is not continued: it is resumed", () =>
    Effect.gen(function*() {
      const open = yield* Runner.submit({ goal: "still open", goalId: "o" })
      const refused = yield* Effect.flip(Continuation.submit({ goalId: open }))
      expect(refused._tag).toBe("@rx/kernel/NotContinuable")
      expect(refused.message).toContain("rx resume o")
      expect((yield* Effect.flip(Continuation.submit({ goalId: "nope" })))._tag).toBe("@rx/kernel/GoalNotFound")
    }).pipe(Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([echo])))))
})
