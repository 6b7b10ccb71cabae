/** Long goals through the built binary: a message from another process, and a chain of continued goals. */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, serveRx, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** How many of a request's messages hold `text`. */
const holding = (body: unknown, text: string) =>
  ((body as { messages?: ReadonlyArray<{ content?: unknown }> }).messages ?? []).filter((m) => typeof m.content === "string" && m.content.includes(text)).length

describe("rx say", () => {
  it.scopedLive("a message sent by a second process while a shell call runs is delivered once, at the next request", () =>
    Effect.gen(function*() {
      const box = sandbox()
      // The call runs until the test lets it end, after the message is recorded.
      const server = yield* FakeServer.make([call("shell", { command: "while [ ! -f go ]; do sleep 0.05; done; echo went" }), call("list_dir", {}), done("heard")])
      const running = start(["run", "wait for go", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "m", "--sandbox", "none"])
      yield* Effect.addFinalizer(() => Effect.sync(() => running.kill("SIGKILL")))
      yield* until(() => jsonLines(running.output().stdout).some((e) => e["_tag"] === "ToolStarted"), "the shell call")
      const goalId = String(jsonLines(running.output().stdout)[0]?.["goalId"])
      const said = yield* rx(["say", goalId, "use the blue folder", "--db", box.db])
      expect(said.stderr).toBe("")
      expect(said.code).toBe(0)
      expect(server.received).toHaveLength(1)
      writeFileSync(join(box.workspace, "go"), "")
      const ran = yield* Effect.promise(() => running.done)
      expect(ran.code).toBe(0)
      const events = jsonLines(ran.stdout)
      // Recorded once, while the call ran; the call ran to its end.
      expect(events.filter((e) => e["_tag"] === "MessageSent")).toMatchObject([{ text: "use the blue folder" }])
      const sent = events.findIndex((e) => e["_tag"] === "MessageSent")
      expect(events[sent - 1]?.["_tag"]).toBe("ToolStarted")
      expect(events[sent + 1]).toMatchObject({ _tag: "ToolSucceeded", tool: "shell" })
      expect(server.received.map((r) => holding(r.body, "use the blue folder"))).toEqual([0, 1, 1])
      expect(events.filter((e) => e["_tag"] === "ModelResponded").map((e) => e["heard"])).toEqual([undefined, 1, undefined])
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
      expect((yield* rx(["inspect", goalId, "--db", box.db])).stdout).toMatch(/message {3}from .+: use the blue folder/)
      // A goal that ended refuses a message, pointing to --continue.
      const refused = yield* rx(["say", goalId, "more", "--db", box.db])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`rx run --continue ${goalId}`)
      expect(existsSync(join(box.workspace, "go"))).toBe(true)
    }))
})

describe("rx run --continue", () => {
  it.scopedLive("a chain of three: each starts from what the last did, the ended logs unchanged, links shown both ways, each replayed", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const server = yield* FakeServer.make([call("read_file", { path: "hello.txt" }), call("list_dir", {}), call("list_dir", { depth: 2 })])
      const common = ["--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "m", "--sandbox", "none", "--max-iterations", "1"]
      const first = yield* rx(["run", "read hello.txt", "--json", ...common])
      const a = String(jsonLines(first.stdout)[0]?.["goalId"])
      expect(jsonLines(first.stdout).at(-1)).toMatchObject({ _tag: "Terminated", reason: "max_iterations" })
      const resumed = yield* rx(["resume", a, "--db", box.db])
      expect(resumed.stdout + resumed.stderr).toContain(`rx run --continue ${a}`)
      const before = (yield* rx(["events", a, "--db", box.db])).stdout
      const second = yield* rx(["run", "--continue", a, "now list the folder", "--json", ...common])
      expect(second.stderr).toContain(`rx run --continue ${String(jsonLines(second.stdout)[0]?.["goalId"])}`)
      const b = String(jsonLines(second.stdout)[0]?.["goalId"])
      expect(jsonLines(second.stdout)[0]).toMatchObject({ _tag: "GoalSubmitted", goal: "read hello.txt", continues: { goalId: a, reason: "max_iterations", text: "now list the folder" } })
      // The new goal's first request holds what the ended one did: its last result.
      expect(holding(server.received[1]?.body, "hello from the workspace")).toBe(1)
      const third = yield* rx(["run", "--continue", b, "--json", ...common])
      const c = String(jsonLines(third.stdout)[0]?.["goalId"])
      expect(jsonLines(third.stdout)[0]).toMatchObject({ continues: { goalId: b, text: "continue" } })
      expect((yield* rx(["events", a, "--db", box.db])).stdout).toBe(before)
      const inspectA = (yield* rx(["inspect", a, "--db", box.db])).stdout
      expect(inspectA).toContain(`continued by ${b}`)
      const inspectB = (yield* rx(["inspect", b, "--db", box.db])).stdout
      expect(inspectB).toContain(`continues ${a}`)
      expect(inspectB).toContain(`continued by ${c}`)
      const listed = (yield* rx(["list", "--db", box.db])).stdout
      expect(listed.split("\n").find((line) => line.startsWith(a))).toContain(`(continued by ${b})`)
      for (const id of [a, b, c]) expect((yield* rx(["replay", id, "--db", box.db])).code).toBe(0)
      expect(server.received).toHaveLength(3)
      // The same links through a server on the log: its view says which goals continue one.
      const { url } = yield* serveRx(box, server.baseUrl)
      const remote = ["--server", url, "--db", box.db]
      expect((yield* rx(["list", ...remote])).stdout.split("\n").find((line) => line.startsWith(a))).toContain(`(continued by ${b})`)
      expect((yield* rx(["inspect", b, ...remote])).stdout).toBe(inspectB)
      // An open goal is not continued.
      const open = yield* rx(["run", "--continue", "nope", ...common])
      expect(open.code).toBe(1)
    }))
})
