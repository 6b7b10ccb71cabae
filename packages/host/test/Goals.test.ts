/**
 * One `Goals` service, two places: a SQLite log on this machine and an rx serve on 127.0.0.1
 * (with the same kind of log behind it). The same calls give the same answers in both, so a
 * command written once against `Goals` behaves the same wherever its goals are.
 */
import { describe, expect, it } from "@effect/vitest"
import { NodeContext } from "@effect/platform-node"
import { Goals, Settings } from "@rx/host"
import { type Event, Goal, State } from "@rx/kernel"
import { OpenAiCompatible } from "@rx/llm"
import { ConfigProvider, Effect, Either, Layer, Option, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { startServer, token } from "../../server/test/helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })

const temp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix))

/** Settings as the command line gives them, typed. */
const flags = (values: Settings.Given) => values

/** Where the goals are: a new log here, or a new rx serve, each with a model that writes a file (asking first) and is done. */
const places = {
  "a log on this machine": Effect.gen(function*() {
    const model = yield* FakeServer.make([call("write_file", { path: "a.txt", content: "approved" }), call("done", { summary: "wrote a.txt" })])
    const workspace = temp("rx-host-ws-")
    const db = path.join(temp("rx-host-db-"), "rx.db")
    const given = flags({ db, workspace, baseUrl: model.baseUrl, model: "fake", sandbox: "none", ask: ["write_file"] })
    return { goals: yield* Goals.make(given), given, workspace }
  }),
  "an rx serve": Effect.gen(function*() {
    const model = yield* FakeServer.make([call("write_file", { path: "a.txt", content: "approved" }), call("done", { summary: "wrote a.txt" })])
    const server = yield* startServer(Layer.orDie(OpenAiCompatible.layerNode({ baseUrl: model.baseUrl, model: "fake" })))
    const given = flags({ server: server.url, ask: ["write_file"] })
    return { goals: yield* Goals.make(given), given, workspace: server.root }
  })
}

describe("Goals: the same answers from a local log and from an rx serve", () => {
  for (const [name, place] of Object.entries(places)) {
    it.scopedLive(`${name}: run until approval, decide, go on to the end; list, events, follow, cancel and decide say the same`, () =>
      Effect.gen(function*() {
        const { given, goals, workspace } = yield* place
        const observed: Array<Event.Event> = []
        const observe = (event: Event.Event) => Effect.sync(() => void observed.push(event))

        const first = yield* goals.run({ goal: Option.some("write a.txt"), goalFile: Option.none(), given, mcp: [], mcpEnv: [], mcpSandbox: [] }, { observe })
        expect(first).toMatchObject({ status: "suspended", reason: "awaiting_approval", iterations: 0 })
        expect(observed.map((e) => e._tag)).toEqual(["GoalSubmitted", "ModelResponded", "ApprovalRequested", "Suspended"])
        const goalId = first.goalId

        const listed = yield* goals.list
        expect(listed.map((g) => [g.goalId, g.status === "terminated" ? "terminated" : "open", g.approval?.tool])).toEqual([[goalId, "open", "write_file"]])

        const decided = yield* goals.decide({ goalId, approve: true, by: "test", reason: "", callId: Option.none() })
        expect(decided).toMatchObject({ callId: `${goalId}:1`, call: { tool: "write_file", input: { path: "a.txt", content: "approved" } } })

        // A local log goes on at resume; a server goes on by itself once the call is decided.
        const end = goals.where._tag === "Log"
          ? yield* goals.resume({ goalId, given: {}, mcpEnv: [] }, { observe })
          : Goal.result(State.fromEvents(goalId, Array.from(yield* goals.follow(goalId, false).pipe(Stream.filterMap((f) => f._tag === "Event" ? Option.some(f.event) : Option.none()), Stream.runCollect))))
        expect(end).toMatchObject({ status: "terminated", reason: "done", iterations: 2 })
        expect(fs.readFileSync(path.join(workspace, "a.txt"), "utf8")).toBe("approved")

        const events = yield* goals.events(goalId)
        expect(events.map((e) => e._tag)).toEqual([
          "GoalSubmitted", "ModelResponded", "ApprovalRequested", "Suspended", "ApprovalDecided", "ToolStarted", "ToolSucceeded", "IterationCompleted",
          "ModelResponded", "IterationCompleted", "Terminated"
        ])
        expect(yield* goals.cancel(goalId, "too late")).toBe("already_terminated")
        const nothing = yield* Effect.either(goals.decide({ goalId, approve: true, by: "test", reason: "", callId: Option.none() }))
        expect(Either.isLeft(nothing) && nothing.left.message).toMatch(/has terminated \(done\); there is nothing to decide/)
        const unknown = yield* Effect.either(goals.events("no-such-goal"))
        expect(Either.isLeft(unknown) && unknown.left.message).toMatch(/no goal with id no-such-goal/)
      }).pipe(
        // The token and the config folder the host reads, given as a ConfigProvider: no variable of this process is read or changed.
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["RX_TOKEN", token], ["XDG_CONFIG_HOME", temp("rx-host-config-")]]))),
        Effect.provide(NodeContext.layer)
      ), 120_000)
  }
})
