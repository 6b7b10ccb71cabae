/** A model server for trees of goals: each goal (found by a marker in its first user message) answers from its own script. */
import { StateStore } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { Effect, Layer } from "effect"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { busyModel } from "./helpers.js"

export type Reply = ReturnType<typeof FakeServer.completion>
const usage = { prompt_tokens: 7, completion_tokens: 3 }
export const call = (name: string, args: unknown): Reply => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }], usage })
export const done = (summary: string) => call("done", { summary })
const body = (reply: Reply) => (reply.kind === "json" ? reply.body : null)

interface Message {
  readonly role?: unknown
  readonly content?: unknown
}
const messagesOf = (request: unknown): ReadonlyArray<Message> =>
  typeof request === "object" && request !== null && "messages" in request && Array.isArray(request.messages) ? request.messages : []

/**
 * Each goal answers from the script whose marker its goal text holds, at the step of how many
 * results its prompt shows (so a resumed goal goes on with the same script).
 */
export const treeModel = (scripts: Readonly<Record<string, ReadonlyArray<Reply>>>) =>
  busyModel(0, (request) => {
    const messages = messagesOf(request)
    const goal = String(messages.find((m) => m.role === "user")?.content ?? "")
    const steps = Object.entries(scripts).find(([marker]) => goal.includes(marker))?.[1] ?? [done("no script")]
    const results = messages.filter((m) => m.role === "tool").length
    return body(steps[Math.min(results, steps.length - 1)] ?? done("no script"))
  })

/** The goals of a log and each one's events, read in this process. */
export const logOf = (db: string) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const goals = yield* store.goals()
    return new Map(yield* Effect.forEach(goals, (g) => Effect.map(store.load(g.goalId), (events) => [g.goalId, events] as const)))
  }).pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename: db, readonly: true }))))
