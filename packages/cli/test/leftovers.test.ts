/**
 * What an older rx could leave in a workspace when killed during a sandboxed call never stops
 * a later command.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { rx, sandbox } from "./helpers.js"

describe("leftovers of an older rx", () => {
  it.live("an empty folder where the workspace's config file belongs is ignored with one note; anything else there is still refused", () =>
    Effect.gen(function*() {
      const box = sandbox()
      mkdirSync(join(box.workspace, "rx.config.json"))
      const shown = yield* rx(["config", "--db", box.db], {}, box.workspace)
      expect(shown.code, shown.stderr).toBe(0)
      expect(shown.stderr.trim().split("\n")).toEqual([
        `rx: ${join(box.workspace, "rx.config.json")} is an empty folder, not a config file (an older rx, killed during a sandboxed call, could leave one): ignored; remove it`
      ])
      // A folder with something in it is not what rx left: refused as before.
      writeFileSync(join(box.workspace, "rx.config.json", "x"), "")
      const refused = yield* rx(["config", "--db", box.db], {}, box.workspace)
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain("not a regular file")
    }))
})
