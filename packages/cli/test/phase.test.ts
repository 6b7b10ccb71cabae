/**
 * Open is not running: `rx list` and `rx inspect` (text and --json) say whether an open goal runs,
 * waits, or is idle, from its lease and its last event, through the built binary with a real
 * process killed by SIGKILL.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { busyModel, jsonLines, rx, sandbox, start, until } from "./helpers.js"

describe("running, waiting, idle", () => {
  it.scopedLive("a goal whose runner is killed (SIGKILL) shows idle with the rx resume hint; while it runs, running", () =>
    Effect.gen(function*() {
      // A model that never answers while the test looks: the run stays in its first model call.
      const model = yield* busyModel(600_000, () => ({}))
      const box = sandbox()
      const child = start(["run", "wait for the model", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--sandbox", "none"])
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      yield* until(() => model.stats.requests > 0, "the run to ask its model")
      const goalId = String(jsonLines(child.output().stdout)[0]?.["goalId"])

      const listed = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(listed.map((g) => [g["goalId"], g["status"], g["phase"]])).toEqual([[goalId, "open", { state: "running" }]])
      const running = yield* rx(["inspect", goalId, "--db", box.db])
      expect(running.stdout).toMatch(/^status {4}open, running: a runner holds it now/m)
      expect((yield* rx(["list", "--db", box.db])).stdout).toMatch(new RegExp(`^${goalId}\\s+running\\s`, "m"))

      child.kill("SIGKILL")
      const killed = yield* Effect.promise(() => child.done)
      expect(killed.signal).toBe("SIGKILL")

      const list = yield* rx(["list", "--db", box.db])
      expect(list.code).toBe(0)
      expect(list.stdout).toMatch(new RegExp(`^${goalId}\\s+idle\\(stopped\\)\\s`, "m"))
      expect(list.stdout).toContain(`rx resume ${goalId} --db ${box.db}`)
      const json = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(json[0]?.["phase"]).toEqual({ state: "idle", why: "stopped" })
      const inspect = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspect.stdout).toMatch(
        new RegExp(`^status {4}open, idle: nothing runs it \\(its runner stopped or was killed before it ended\\): rx resume ${goalId} --db \\S+ continues it`, "m")
      )
      const inspectJson = JSON.parse((yield* rx(["inspect", goalId, "--json", "--db", box.db])).stdout) as Record<string, unknown>
      expect(inspectJson["status"]).toBe("open")
      expect(inspectJson["phase"]).toEqual({ state: "idle", why: "stopped" })
    }))
})
