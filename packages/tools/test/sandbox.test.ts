import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { Sandbox } from "../src/index.js"
import { invoke, makeDirs, ok, withTools } from "./helpers.js"
import { alive, shellSuite } from "./shellSuite.js"

/** Whether bubblewrap is here and can create namespaces; the reason when it cannot. */
const unavailable: string | undefined = await (async () => {
  const dirs = makeDirs()
  const found = Sandbox.find(dirs.ws)
  if (Either.isLeft(found)) {
    dirs.cleanup()
    return `bwrap cannot be used: ${found.left}`
  }
  const problem = await Effect.runPromise(Sandbox.probe(found.right, dirs.ws))
  dirs.cleanup()
  return problem
})()

if (unavailable !== undefined) {
  console.warn(`SKIPPING the bubblewrap sandbox tests: ${unavailable}`)
}

describe.skipIf(unavailable !== undefined)("shell, sandbox bwrap", () => {
  shellSuite("bwrap")

  const setup = () => {
    const dirs = makeDirs()
    return { ...dirs, config: { workspace: dirs.ws, sandbox: "bwrap" as const } }
  }

  it.live("has no network: the host's loopback server is unreachable", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const server = http.createServer((_, res) => res.end("reachable"))
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      const port = (server.address() as AddressInfo).port
      const probe = `cat /proc/net/dev; bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3' && echo CONNECTED`
      try {
        const inside = ok(yield* withTools(config, invoke("shell", { command: probe, timeout_ms: 10_000 })))
        expect(String(inside["stdout"])).not.toContain("CONNECTED")
        expect(String(inside["stdout"])).not.toContain("reachable")
        // Only the loopback interface exists, and it is a fresh one.
        expect(String(inside["stdout"])).toMatch(/\blo:/)
        expect(String(inside["stdout"])).not.toMatch(/\b(eth|ens|enp|wlan|veth)\w*:/)
        // The same command without the sandbox does connect: the check above can fail.
        const outside = ok(yield* withTools({ ...config, sandbox: "none" }, invoke("shell", { command: probe, timeout_ms: 10_000 })))
        expect(String(outside["stdout"])).toContain("CONNECTED")
      } finally {
        server.close()
      }
      cleanup()
    }))

  it.live("the system is read-only, the workspace writable, /tmp private", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const marker = `rx-sandbox-${Date.now()}`
      const out = ok(yield* withTools(config, invoke("shell", {
        command: `touch /usr/${marker} 2>&1; touch /etc/${marker} 2>&1; echo inside > /tmp/${marker} && cat /tmp/${marker}; echo ws > in-ws.txt; ls /root 2>&1 | head -1`
      })))
      expect(String(out["stdout"])).toContain("Read-only file system")
      expect(String(out["stdout"])).toContain("inside")
      expect(fs.existsSync(`/usr/${marker}`)).toBe(false)
      expect(fs.existsSync(`/etc/${marker}`)).toBe(false)
      expect(fs.existsSync(`/tmp/${marker}`)).toBe(false)
      expect(fs.readFileSync(path.join(ws, "in-ws.txt"), "utf8")).toBe("ws\n")
      cleanup()
    }))

  it.live("drops every capability and runs in its own PID namespace", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const out = ok(yield* withTools(config, invoke("shell", { command: "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status; ls /proc | grep -E '^[0-9]+$' | wc -l" })))
      const stdout = String(out["stdout"])
      expect(stdout).toMatch(/CapEff:\s+0000000000000000/)
      expect(stdout).toMatch(/CapPrm:\s+0000000000000000/)
      expect(stdout).toMatch(/CapBnd:\s+0000000000000000/)
      // bwrap's init, the shell, grep/ls/wc: a handful, not the host's processes.
      const count = Number(stdout.trim().split("\n").pop())
      expect(count).toBeGreaterThan(0)
      expect(count).toBeLessThan(10)
      cleanup()
    }))
})

describe.skipIf(unavailable !== undefined)("bubblewrap", () => {
  it.live("the sandbox dies with the process that started it", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const bwrap = Either.getOrThrow(Sandbox.find(ws))
      const tag = String(100_000 + Math.floor(Math.random() * 899_999))
      const args = Sandbox.bwrapArgs(ws, ["/bin/sh", "-c", `sleep 50.${tag}`], ["--bind", ws, ws])
      // A stand-in for rx: it starts the sandbox, then is killed without a chance to clean up.
      const parent = spawn(process.execPath, ["-e", `require("node:child_process").spawn(${JSON.stringify(bwrap)}, ${JSON.stringify(args)}, { stdio: "ignore" }); setInterval(() => {}, 1000)`], { stdio: "ignore" })
      for (let i = 0; i < 50 && alive(`50.${tag}`).length === 0; i++) yield* Effect.sleep("50 millis")
      expect(alive(`50.${tag}`).length).toBeGreaterThan(0)
      parent.kill("SIGKILL")
      for (let i = 0; i < 50 && alive(`50.${tag}`).length > 0; i++) yield* Effect.sleep("100 millis")
      expect(alive(`50.${tag}`)).toEqual([])
      cleanup()
    }))
})
