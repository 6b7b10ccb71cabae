import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { failed, invoke, makeDirs, ok, withTools } from "./helpers.js"

/** Live processes whose command line holds `needle` (zombies have none and do not count). */
export const alive = (needle: string): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((pid) => {
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ")
      return cmdline.includes(needle) && Number(pid) !== process.pid ? [Number(pid)] : []
    } catch {
      return []
    }
  })

const waitGone = (needle: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 50 && alive(needle).length > 0; i++) yield* Effect.sleep("100 millis")
    return alive(needle)
  })

/** Shell behaviour common to both modes; `mode` picks the sandbox. */
export const shellSuite = (mode: "none" | "bwrap") => {
  const setup = () => {
    const dirs = makeDirs()
    return { ...dirs, config: { workspace: dirs.ws, sandbox: mode, shellGraceMs: 500 } }
  }

  it.live("reports exit code, output and duration; a non-zero exit is a result", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const out = ok(yield* withTools(config, invoke("shell", { command: "echo out; echo err >&2; pwd; exit 3" })))
      expect(out["exit_code"]).toBe(3)
      expect(out["signal"]).toBe(null)
      expect(out["timed_out"]).toBe(false)
      expect(out["stdout"]).toBe(`out\n${ws}\n`)
      expect(out["stderr"]).toBe("err\n")
      expect(out["sandbox"]).toBe(mode)
      expect(out["cwd"]).toBe(ws)
      expect(typeof out["duration_ms"]).toBe("number")
      const wrote = ok(yield* withTools(config, invoke("shell", { command: "printf made > made.txt" })))
      expect(wrote["exit_code"]).toBe(0)
      expect(fs.readFileSync(path.join(ws, "made.txt"), "utf8")).toBe("made")
      cleanup()
    }))

  it.live("on timeout kills the whole tree, a setsid grandchild included", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const tag = String(100_000 + Math.floor(Math.random() * 899_999))
      const started = Date.now()
      const out = ok(yield* withTools(config, invoke("shell", {
        // An orphaned setsid grandchild, a setsid grandchild, a child ignoring SIGTERM, and the command.
        command: `(setsid sleep 70.${tag} &); setsid sh -c 'sleep 71.${tag}' & (trap '' TERM; sleep 72.${tag}) & sleep 73.${tag}`,
        timeout_ms: 1_000
      })))
      expect(out["timed_out"]).toBe(true)
      expect(out["exit_code"] === null || out["signal"] !== null || out["exit_code"] !== 0).toBe(true)
      // Not the 70 s its sleeps would take.
      expect(Date.now() - started).toBeLessThan(40_000)
      expect(yield* waitGone(tag)).toEqual([])
      cleanup()
    }))

  it.live("gives a command that handles SIGTERM its grace period", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const out = ok(yield* withTools({ ...config, shellGraceMs: 5_000 }, invoke("shell", {
        command: "trap 'sleep 0.5; echo cleaned > cleaned.txt; exit 7' TERM; while :; do sleep 0.05; done",
        timeout_ms: 500
      })))
      expect(out["timed_out"]).toBe(true)
      expect(fs.readFileSync(path.join(ws, "cleaned.txt"), "utf8")).toBe("cleaned\n")
      cleanup()
    }))

  it.live("returns when the command exits though a background child holds its pipes", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const tag = String(100_000 + Math.floor(Math.random() * 899_999))
      const started = Date.now()
      const out = ok(yield* withTools(config, invoke("shell", { command: `sleep 30.${tag} & echo started`, timeout_ms: 60_000 })))
      // Not the 30 s its background child sleeps.
      expect(Date.now() - started).toBeLessThan(20_000)
      expect(out["exit_code"]).toBe(0)
      expect(out["stdout"]).toBe("started\n")
      expect(out["timed_out"]).toBe(false)
      expect(yield* waitGone(tag)).toEqual([])
      cleanup()
    }))

  it.live("caps a flood of output, keeping head and tail, with bounded memory", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const before = process.memoryUsage().rss
      const out = ok(yield* withTools({ ...config, shellOutputBytes: 1000, shellMaxOutputBytes: 300_000_000 }, invoke("shell", {
        command: "echo first; yes | head -c 200000000; echo; echo last",
        timeout_ms: 60_000
      })))
      const grown = process.memoryUsage().rss - before
      expect(out["exit_code"]).toBe(0)
      expect(out["stdout_bytes"]).toBe(6 + 200_000_000 + 1 + 5)
      expect(out["stdout_dropped_bytes"]).toBe(6 + 200_000_000 + 1 + 5 - 1000)
      expect(out["truncated"]).toBe(true)
      const stdout = String(out["stdout"])
      expect(stdout.startsWith("first\ny\ny\n")).toBe(true)
      expect(stdout.endsWith("y\ny\n\nlast\n")).toBe(true)
      expect(stdout).toContain(`[... ${200_000_012 - 1000} bytes dropped ...]`)
      // 200 MB went through; far less stayed.
      expect(grown).toBeLessThan(100_000_000)
      cleanup()
    }), 120_000)

  it.live("an endless flood is capped and ended by the timeout", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const out = ok(yield* withTools({ ...config, shellOutputBytes: 2000, shellMaxOutputBytes: Number.MAX_SAFE_INTEGER }, invoke("shell", { command: "yes", timeout_ms: 1_000 })))
      expect(out["timed_out"]).toBe(true)
      expect(String(out["stdout"]).length).toBeLessThan(2_100)
      expect(Number(out["stdout_dropped_bytes"])).toBeGreaterThan(0)
      cleanup()
    }))

  it.live("hides rx's secrets from the command, /proc/1/environ included", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      process.env["RX_TEST_API_KEY"] = "sk-very-secret-1"
      process.env["GITHUB_TOKEN"] = "ghp-very-secret-2"
      process.env["PLAIN_SETTING"] = "very-secret-3"
      try {
        const out = ok(yield* withTools({ ...config, shellEnv: ["PATH", "HOME", "GITHUB_TOKEN"] }, invoke("shell", {
          command: "env; echo ==init; cat /proc/1/environ | tr '\\0' '\\n'; echo ==self; cat /proc/$$/environ | tr '\\0' '\\n'"
        })))
        const stdout = String(out["stdout"])
        expect(stdout).toContain("PATH=")
        expect(stdout).not.toContain("very-secret")
        expect(stdout.split("==self")[1]).toContain("RX_SHELL_CALL=")
        // In the sandbox, PID 1 is bwrap's init: it was started with the reduced environment.
        if (mode === "bwrap") expect(stdout.split("==init")[1]?.split("==self")[0]).toContain("RX_SHELL_CALL=")
      } finally {
        delete process.env["RX_TEST_API_KEY"]
        delete process.env["GITHUB_TOKEN"]
        delete process.env["PLAIN_SETTING"]
      }
      cleanup()
    }))

  it.live("refuses a timeout above the limit", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const failure = failed(yield* withTools({ ...config, shellMaxTimeoutMs: 5_000 }, invoke("shell", { command: "true", timeout_ms: 6_000 })))
      expect(failure.kind).toBe("recoverable")
      cleanup()
    }))
}

