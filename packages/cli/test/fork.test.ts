/**
 * `rx fork ID --at N` through the real binary: a 20-step goal whose every step appends a line to
 * a ledger file, forked at step 5 against another model. The fork's log starts with the old
 * goal's first 5 steps, none of which runs again (the ledger), goes on live, replays identically,
 * and the two goals are linked both ways in rx list and rx inspect, on this machine and through
 * a server.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, serveRx } from "./helpers.js"

type Json = Record<string, any>

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const append = (line: string) => call("shell", { command: `echo ${line} >> ledger.txt` })

describe("rx fork", () => {
  it.scopedLive("a fork at step 5 of a 20-step goal: the first 5 steps copied, not run again; linked both ways, here and through rx serve; replay identical", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const ledger = join(box.workspace, "ledger.txt")
      const steps = [...Array.from({ length: 19 }, (_, i) => append(`step${i + 1}`)), call("done", { summary: "19 lines" })]
      const first = yield* FakeServer.make(steps)
      const common = ["--db", box.db, "--model", "fake", "--retries", "0"]
      const ran = yield* rx(["run", "append 19 lines to the ledger", ...common, "--base-url", first.baseUrl, "--workspace", box.workspace, "--sandbox", "none", "--max-iterations", "30", "--json"])
      expect(ran.code, ran.stderr).toBe(0)
      const original = jsonLines(ran.stdout)
      const goalId = String(original[0]?.["goalId"])
      expect(original.filter((e) => e["_tag"] === "IterationCompleted")).toHaveLength(20)
      const lines = Array.from({ length: 19 }, (_, i) => `step${i + 1}`)
      expect(readFileSync(ledger, "utf8").trim().split("\n")).toEqual(lines)

      const refused = yield* rx(["fork", goalId, "--at", "21", ...common])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`goal ${goalId} has no completed step 21 to fork at (steps 1 to 20)`)
      expect((yield* rx(["fork", goalId, ...common])).stderr).toContain("rx fork needs --at N")
      // What the fork's resume would refuse is refused before anything is recorded: no fork is left behind.
      const missing = join(box.workspace, "gone")
      const nowhere = yield* rx(["fork", goalId, "--at", "5", ...common, "--workspace", missing])
      expect([nowhere.code, nowhere.stderr]).toEqual([1, `rx: the workspace ${missing} does not exist: create it, or pass --workspace with an existing folder\n`])
      const capped = yield* rx(["fork", goalId, "--at", "5", ...common, "--max-iterations", "5"])
      expect([capped.code, capped.stderr]).toEqual([1, "rx: a fork at step 5 starts with 5 completed steps: --max-iterations must be more than 5\n"])
      expect(jsonLines((yield* rx(["list", "--db", box.db, "--json"])).stdout).map((g) => g["goalId"])).toEqual([goalId])

      const second = yield* FakeServer.make([append("fork"), call("done", { summary: "forked" })])
      const forked = yield* rx(["fork", goalId, "--at", "5", ...common, "--base-url", second.baseUrl, "--json"])
      expect(forked.code, forked.stderr).toBe(0)
      expect(forked.stderr).toContain(`is a fork of ${goalId} at step 5: its first 5 steps are copied from the log and not run again. It runs in ${box.workspace}, whose files are as they are now, not as they were at step 5`)
      // Only the fork's own call ran: the first 5 steps were not run again.
      expect(readFileSync(ledger, "utf8").trim().split("\n")).toEqual([...lines, "fork"])
      expect(second.received).toHaveLength(2)
      const asked = JSON.stringify((second.received[0]?.body as Json)["messages"])
      expect(asked).toContain("step5")
      expect(asked).not.toContain("step6")

      const forkId = String(jsonLines(forked.stdout)[0]?.["goalId"])
      expect(forkId).not.toBe(goalId)
      const log = jsonLines((yield* rx(["events", forkId, "--db", box.db])).stdout)
      expect(log[0]).toMatchObject({ _tag: "GoalSubmitted", goalId: forkId, forkedFrom: { goalId, iteration: 5 } })
      // The copied steps are the old ones, under the fork's id and call ids.
      const end = original.findIndex((e) => e["_tag"] === "IterationCompleted" && e["iteration"] === 5)
      const renamed = (e: Json) => JSON.parse(JSON.stringify(e).split(goalId).join(forkId))
      expect(log.slice(1, end + 1)).toEqual(original.slice(1, end + 1).map(renamed))
      expect(log.slice(end + 1).filter((e) => e["_tag"] === "ToolStarted").map((e) => [e["callId"], e["input"]])).toEqual([[`${forkId}:6`, { command: "echo fork >> ledger.txt" }]])
      expect(log.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done", iteration: 7 })

      const replayed = yield* rx(["replay", forkId, "--db", box.db])
      expect(replayed.code, replayed.stdout).toBe(0)
      expect(replayed.stdout).toContain("identical")

      const listed = yield* rx(["list", "--db", box.db])
      expect(listed.stdout).toMatch(new RegExp(`\\n${goalId} .*\\n⑂ ${forkId} .*\\(fork of ${goalId} at step 5\\)`))
      const json = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(json.map((g) => [g["goalId"], g["forkedFrom"]])).toEqual([[forkId, { goalId, iteration: 5 }], [goalId, null]])
      const inspectedFork = yield* rx(["inspect", forkId, "--db", box.db])
      expect(inspectedFork.stdout).toContain(`forked from ${goalId} at step 5`)
      const inspectedOld = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspectedOld.stdout).toContain(`forks     ${forkId} (at step 5)`)
      const localView = JSON.parse((yield* rx(["inspect", goalId, "--db", box.db, "--json"])).stdout) as unknown
      expect(localView).toMatchObject({ forkedFrom: null, forks: [{ goalId: forkId, iteration: 5 }] })

      // The same links through a server on the log.
      const { url } = yield* serveRx(box, first.baseUrl)
      const remote = ["--server", url, "--db", box.db]
      expect((yield* rx(["list", ...remote])).stdout).toMatch(new RegExp(`\\n${goalId} .*\\n⑂ ${forkId} .*\\(fork of ${goalId} at step 5\\)`))
      // The server's view (`GET /v1/goals/{id}/view`) is the one the log gives here, byte for byte.
      expect(JSON.parse((yield* rx(["inspect", goalId, ...remote, "--json"])).stdout)).toEqual(localView)
      expect((yield* rx(["inspect", goalId, ...remote])).stdout).toBe(inspectedOld.stdout)
      expect((yield* rx(["inspect", forkId, ...remote])).stdout).toContain(`forked from ${goalId} at step 5`)
    }))
})
