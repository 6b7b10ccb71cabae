/**
 * Sub-goals on a server that offers `delegate`: a goal submitted over HTTP delegates, its sub-goal
 * runs in its run, the API names each goal's parent and lists a goal's sub-goals, and a decision
 * on a sub-goal's call makes the whole tree go on.
 */
import { describe, expect, it } from "@effect/vitest"
import { LanguageModel, Replay, StateStore } from "@rx/kernel"
import { Effect } from "effect"
import { call, modelByGoal, startServer, type Running, withStore } from "./helpers.js"

const tree = modelByGoal((goal, turn) =>
  Effect.succeed(
    goal.startsWith("parent")
      ? turn === 0 ? LanguageModel.callTool("delegate", { goal: "child: write the note", tools: ["write_file"] }) : LanguageModel.done("the child wrote it")
      : turn === 0
      ? LanguageModel.callTool("write_file", { path: "note.txt", content: "from the child\n" })
      : LanguageModel.done("written")
  )
)

const submit = (server: Running, body: unknown) =>
  Effect.map(call(server, "/v1/goals", { method: "POST", body }), (reply) => (reply.body as { goalId: string }).goalId)

interface Goal {
  readonly goalId: string
  readonly parent: string | null
  readonly status: string
  readonly reason: string | null
  readonly suspended: { readonly reason: string; readonly child?: string } | null
  readonly approval: { readonly callId: string } | null
}

const goal = (server: Running, goalId: string) => Effect.map(call(server, `/v1/goals/${goalId}`), (reply) => reply.body as Goal)
const children = (server: Running, goalId: string) =>
  Effect.map(call(server, `/v1/goals?parent=${encodeURIComponent(goalId)}`), (reply) => (reply.body as { goals: ReadonlyArray<Goal> }).goals)

/** Poll until `check` holds of the goal (a guard of a minute, far longer than it takes). */
const until = (server: Running, goalId: string, check: (g: Goal) => boolean) =>
  Effect.gen(function*() {
    for (;;) {
      const g = yield* goal(server, goalId)
      if (check(g)) return g
      yield* Effect.sleep("50 millis")
    }
  }).pipe(Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new Error(`goal ${goalId} never got there`) }))

describe("sub-goals over HTTP", () => {
  it.scopedLive("a goal submitted to a server that offers delegate runs its sub-goal; the API names the parent and lists the sub-goals", () =>
    Effect.gen(function*() {
      const server = yield* startServer(tree, { delegate: true })
      const parent = yield* submit(server, { goal: "parent: delegate the note" })
      const ended = yield* until(server, parent, (g) => g.status === "terminated")
      expect(ended).toMatchObject({ reason: "done", parent: null })
      const listed = yield* children(server, parent)
      expect(listed.map((g) => [g.goalId, g.parent, g.status, g.reason])).toEqual([[`${parent}.1`, parent, "terminated", "done"]])
      expect(yield* goal(server, `${parent}.1`)).toMatchObject({ parent })
      expect(yield* children(server, `${parent}.1`)).toEqual([])
      // The whole list names each goal's parent too.
      const all = (yield* call(server, "/v1/goals")).body as { goals: ReadonlyArray<Goal> }
      expect(all.goals.map((g) => [g.goalId, g.parent]).sort()).toEqual([[parent, null], [`${parent}.1`, parent]].sort())
      const logs = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => Effect.all([store.load(parent), store.load(`${parent}.1`)])))
      for (const events of logs) expect((yield* Replay.verify(events)).reason).toBe("done")
      expect(logs[0]?.[0]).toMatchObject({ tools: expect.arrayContaining([expect.objectContaining({ name: "delegate" })]) })
    }))

  it.scopedLive("a server that does not offer delegate records none", () =>
    Effect.gen(function*() {
      const server = yield* startServer(tree)
      const parent = yield* submit(server, { goal: "parent: delegate the note" })
      yield* until(server, parent, (g) => g.status === "terminated")
      expect(yield* children(server, parent)).toEqual([])
      const [submitted] = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(parent)))
      expect(submitted?._tag === "GoalSubmitted" && submitted.tools.map((t) => t.name)).not.toContain("delegate")
    }))

  it.scopedLive("a sub-goal's call waits for approval: the parent says which sub-goal; approving the sub-goal's call over HTTP finishes both", () =>
    Effect.gen(function*() {
      const server = yield* startServer(tree, { delegate: true })
      const parent = yield* submit(server, { goal: "parent: delegate the note", options: { approval: { write_file: "ask" } } })
      const child = `${parent}.1`
      const waiting = yield* until(server, child, (g) => g.status === "waiting")
      const above = yield* until(server, parent, (g) => g.suspended !== null)
      expect(above).toMatchObject({ status: "open", suspended: { reason: "awaiting_approval", child } })
      const decided = yield* call(server, `/v1/goals/${child}/approvals/${encodeURIComponent(waiting.approval?.callId ?? "")}`, { method: "POST", body: { approve: true, by: "ann" } })
      expect(decided.status).toBe(202)
      expect(yield* until(server, parent, (g) => g.status === "terminated")).toMatchObject({ reason: "done" })
      expect(yield* goal(server, child)).toMatchObject({ status: "terminated", reason: "done" })
    }))
})
