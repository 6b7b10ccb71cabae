/**
 * Getting `rx`: from a fresh clone of this repository, one command (scripts/install-rx.mjs)
 * installs a working `rx` into an empty prefix, and `rx demo` runs from another folder with only
 * that prefix's bin and Node on the PATH. One test: it builds and packs once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { exec } from "./helpers.js"

const repo = join(import.meta.dirname, "..", "..", "..")
const nodeMajor = Number(process.versions.node.split(".")[0])

describe("installing rx from a clone", () => {
  it.live.skipIf(nodeMajor >= 22)("on a Node older than 22, install-rx refuses in one line and does nothing", () =>
    Effect.gen(function*() {
      const ran = yield* exec(process.execPath, [join(repo, "scripts", "install-rx.mjs"), "--pack", join(tmpdir(), "rx-install-refused")], {})
      expect(ran.code).toBe(1)
      expect(ran.stdout).toBe("")
      expect(ran.stderr).toBe(`install-rx: rx needs Node 22 or later, and this is Node ${process.version}: run this script with Node 22 or 24\n`)
      expect(existsSync(join(tmpdir(), "rx-install-refused"))).toBe(false)
    }))

  it.live.skipIf(nodeMajor < 22)("node scripts/install-rx.mjs --prefix DIR: a fresh clone, an empty prefix, then rx demo from another folder", () =>
    Effect.gen(function*() {
      const root = mkdtempSync(join(tmpdir(), "rx-install-test-"))
      const clone = join(root, "clone")
      const prefix = join(root, "prefix")
      const elsewhere = join(root, "elsewhere")
      mkdirSync(prefix)
      mkdirSync(elsewhere)
      // The committed state, as a user clones it: no node_modules, no build.
      execFileSync("git", ["clone", "--quiet", "--no-hardlinks", repo, clone])
      expect(existsSync(join(clone, "node_modules"))).toBe(false)
      const installed = yield* exec(process.execPath, [join(clone, "scripts", "install-rx.mjs"), "--prefix", prefix], {
        // Everything is in pnpm's store here: no network needed (pnpm reads npm_config_ variables).
        env: { npm_config_offline: "true" }
      })
      expect(installed.stderr.split("\n").filter((l) => /error|ERR!/i.test(l))).toEqual([])
      expect(installed.code).toBe(0)
      // Packed for the Node that ran it, with the native addon built for that Node.
      const node = `Node ${process.version} (${process.platform}-${process.arch}, ABI ${process.versions.modules})`
      expect(installed.stdout).toContain(`install-rx: packing for ${node}: better-sqlite3's native addon is built for it`)
      expect(installed.stdout).toContain(`install-rx: installed rx `)
      expect(installed.stdout).toContain(` for ${node}: `)
      expect(readdirSync(join(prefix, "bin"))).toEqual(["rx"])

      // Only the prefix's bin and Node: nothing of the clone or of pnpm is reachable.
      const path = [join(prefix, "bin"), dirname(process.execPath), "/usr/bin", "/bin"].join(":")
      const demo = execFileSync(join(prefix, "bin", "rx"), ["demo"], { cwd: elsewhere, encoding: "utf8", env: { PATH: path, HOME: elsewhere } })
      expect(demo).toContain("done after 5 iterations")
      expect(demo).toMatch(/identical: \d+ events reproduced with no live calls/)
      const version = execFileSync(join(prefix, "bin", "rx"), ["--version"], { encoding: "utf8", env: { PATH: path } })
      expect(version).toMatch(/^rx \d+\.\d+\.\d+/)
    }), 600_000)
})
