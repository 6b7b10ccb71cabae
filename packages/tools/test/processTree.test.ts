/**
 * ProcessTree: a long-lived program and whatever it starts (a daemon in its own session
 * included) end with the scope, and its cgroup is removed; the empty cgroups of rx processes
 * that are gone are swept, those in use never. Real processes, found with /proc.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Limits from "../src/internal/limits.js"
import { ProcessTree } from "../src/index.js"
import { invoke, makeDirs, ok, withTools } from "./helpers.js"
import { marked, processesWith } from "./processes.js"

const cgroups = Limits.discoverOnce()

/** Poll until `check` holds, or `ms` have passed; whether it held. */
const within = (check: () => boolean, ms = 20_000) =>
  Effect.promise(() =>
    new Promise<boolean>((resolve) => {
      const began = Date.now()
      const tick = () => (check() ? resolve(true) : Date.now() - began > ms ? resolve(false) : setTimeout(tick, 50))
      tick()
    })
  )

/**
 * A shell line that leaves processes behind: one in a session of its own, one in the background
 * (each a shell that waits on `sleep`, with the marker in its command line).
 */
const leaver = (marker: string) =>
  `setsid sh -c 'sleep 600; echo ${marker}-daemon' </dev/null >/dev/null 2>&1 & sh -c 'sleep 600; echo ${marker}-child' & exec sleep 600`

describe("ProcessTree", () => {
  it.scoped("the program, its children and a daemon in its own session end when the scope closes; its cgroup is removed", () =>
    Effect.gen(function*() {
      const marker = yield* marked
      let group: string | undefined
      yield* Effect.scoped(Effect.gen(function*() {
        const tree = yield* ProcessTree.spawn({ file: "/bin/sh", args: ["-c", leaver(marker)], cwd: "/", env: { PATH: "/usr/bin:/bin" }, kind: "mcp", graceMs: 500 })
        // The root's own command line holds both markers until it execs `sleep`: it does not count.
        const started = (name: string) => processesWith(`${marker}-${name}`).filter((pid) => pid !== tree.child.pid).length === 1
        expect(yield* within(() => started("daemon") && started("child"), 60_000)).toBe(true)
        expect(tree.members().length).toBeGreaterThanOrEqual(3)
        if (cgroups !== undefined) {
          const id = tree.marker.split("=")[1] ?? ""
          group = fs.readdirSync(cgroups.dir).find((name) => name.startsWith(`rx-mcp-${id}-`))
          expect(group).toBe(`rx-mcp-${id}-${process.pid}`)
        }
      }))
      expect(processesWith(marker)).toEqual([])
      if (cgroups !== undefined && group !== undefined) expect(fs.existsSync(path.join(cgroups.dir, group))).toBe(false)
    }))
})

describe.skipIf(cgroups === undefined)("cgroups of rx processes that are gone", () => {
  it.scoped("are swept when empty; one whose rx is alive, or that still holds a process, is kept", () =>
    Effect.gen(function*() {
      const base = cgroups ?? { dir: "/", pids: false }
      // A pid that is not running: a child that has exited.
      const dead = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const child = spawn("/bin/true")
          child.once("exit", () => resolve(child.pid ?? 0))
        })
      )
      const hex = () => randomBytes(12).toString("hex")
      const leftover = path.join(base.dir, `rx-shell-${hex()}-${dead}`)
      const mine = path.join(base.dir, `rx-mcp-${hex()}-${process.pid}`)
      const held = path.join(base.dir, `rx-shell-${hex()}-${dead}`)
      const other = path.join(base.dir, `not-rx-${hex()}`)
      for (const dir of [leftover, mine, held, other]) fs.mkdirSync(dir)
      yield* Effect.addFinalizer(() => Effect.sync(() => [leftover, mine, held, other].forEach((dir) => Limits.remove(dir))))
      // A process in `held`: a group in use is never removed.
      const sleeper = yield* Effect.acquireRelease(
        Effect.sync(() => spawn("/bin/sh", ["-c", `echo $$ > ${path.join(held, "cgroup.procs")} && exec sleep 600`], { stdio: "ignore" })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      expect(yield* within(() => Limits.members(held).length === 1)).toBe(true)
      // What this sweep removed is not counted: every rx process sweeps once, so one running beside
      // this test may have removed the leftover first.
      Limits.sweep(base)
      expect(fs.existsSync(leftover)).toBe(false)
      expect(fs.existsSync(mine)).toBe(true)
      expect(fs.existsSync(held)).toBe(true)
      expect(fs.existsSync(other)).toBe(true)
      sleeper.kill("SIGKILL")
      expect(yield* within(() => Limits.members(held).length === 0)).toBe(true)
      expect(yield* within(() => (Limits.sweep(base), !fs.existsSync(held)))).toBe(true)
    }))

  it.live("a shell call's cgroup is removed when the call ends", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const ours = () => fs.readdirSync(cgroups?.dir ?? "/").filter((name) => name.startsWith("rx-shell-") && name.endsWith(`-${process.pid}`))
      for (let i = 0; i < 5; i++) {
        const output = ok(yield* withTools({ workspace: ws, sandbox: "none", shellGraceMs: 200 }, invoke("shell", { command: "sleep 600 & echo $RX_SHELL_CALL" })))
        expect(String(output["stdout"]).trim()).toMatch(/^[0-9a-f]{24}$/)
        expect(ours()).toEqual([])
      }
      cleanup()
    }))
})
