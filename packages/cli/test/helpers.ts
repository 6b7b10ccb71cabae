/** Run the built `rx` binary as a child process, in temp folders, against a fake model server. */
import { Effect } from "effect"
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { validate } from "../../llm/test/FakeServer.js"

/** The shipped binary: the bundled CLI (`pnpm build` makes it). */
export const bin = join(import.meta.dirname, "..", "dist", "rx.mjs")

export interface Ran {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** The state folder rx's default log goes into, unless a test gives its own. */
const stateHome = mkdtempSync(join(tmpdir(), "rx-state-"))

/** A fresh folder with a workspace (holding `hello.txt`) and a database path. */
export const sandbox = () => {
  const root = mkdtempSync(join(tmpdir(), "rx-cli-"))
  const workspace = join(root, "ws")
  const db = join(root, "rx.db")
  mkdirSync(workspace, { recursive: true })
  writeFileSync(join(workspace, "hello.txt"), "hello from the workspace\n")
  return { root, workspace, db }
}

/**
 * Start `rx args...` (in `cwd`, by default this process's); the environment has no RX_ variables
 * but those given, and a variable given as `undefined` is removed.
 */
export const start = (
  args: ReadonlyArray<string>,
  env: Record<string, string | undefined> = {},
  cwd?: string
): ChildProcess & { output: () => Ran; done: Promise<Ran> } => {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RX_")))
  // The default log of these runs is never the user's own.
  clean["XDG_STATE_HOME"] = stateHome
  const merged = Object.fromEntries(Object.entries({ ...clean, ...env }).filter((e): e is [string, string] => e[1] !== undefined))
  const child = spawn(process.execPath, [bin, ...args], { env: merged, cwd, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const done = new Promise<Ran>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  )
  return Object.assign(child, { output: () => ({ code: child.exitCode, signal: child.signalCode, stdout, stderr }), done })
}

/** Run `rx args...` to completion. */
export const rx = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}, cwd?: string) =>
  Effect.promise(() => start(args, env, cwd).done)

/**
 * Wait until `check` holds (polling); fail only after `timeoutMs`, a guard against a hang that is
 * far longer than the wait can take on a loaded machine.
 */
export const until = (check: () => boolean, what: string, timeoutMs = 120_000) =>
  Effect.promise(
    () =>
      new Promise<void>((resolve, reject) => {
        const began = Date.now()
        const tick = () => {
          if (check()) return resolve()
          if (Date.now() - began > timeoutMs) return reject(new Error(`timed out waiting for ${what}`))
          setTimeout(tick, 25)
        }
        tick()
      })
  )

/** The JSON lines of an output. */
export const jsonLines = (text: string): ReadonlyArray<Record<string, unknown>> =>
  text.split("\n").filter((l) => l.trim().startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>)

/** Whether bubblewrap works here: the sandboxed cases need it, and are skipped with a printed reason without it. */
export const bwrapWorks = (() => {
  try {
    execFileSync("/usr/bin/bwrap", ["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", "/bin/true"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

/**
 * Run any program to completion without blocking this process (a fake model server in it must
 * go on answering), with `input` on its standard input.
 */
export const exec = (file: string, args: ReadonlyArray<string>, options: { readonly input?: string; readonly env?: Record<string, string> } = {}) =>
  Effect.promise(() =>
    new Promise<Ran>((resolve) => {
      const child = spawn(file, args, { env: { ...process.env, XDG_STATE_HOME: stateHome, ...options.env }, stdio: ["pipe", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
      child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
      child.stdin.end(options.input ?? "")
    })
  )

/**
 * `rx serve` on a free port for `box` (its log and workspace, `--sandbox none`), stopped (SIGTERM)
 * with the scope; its URL once it listens.
 */
export const serveRx = (box: { readonly db: string; readonly workspace: string }, baseUrl: string, extra: ReadonlyArray<string> = []) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const child = start(["serve", "--port", "0", "--db", box.db, "--workspace", box.workspace, "--base-url", baseUrl, "--model", "fake", "--sandbox", "none", ...extra])
      yield* until(() => /listening on (http:\/\/\S+)/.test(child.output().stdout) || child.exitCode !== null, "rx serve to listen")
      const url = /listening on (http:\/\/\S+)/.exec(child.output().stdout)?.[1] ?? ""
      if (url === "") return yield* Effect.die(new Error(`rx serve did not start: ${child.output().stderr}`))
      return { child, url }
    }),
    ({ child }) => Effect.promise(() => (child.kill("SIGTERM"), child.done))
  )

/** What `busyModel` saw: requests, those in flight now and at most at once, and any not valid for the API. */
export interface BusyModelStats {
  requests: number
  inFlight: number
  maxInFlight: number
  readonly invalid: Array<string>
}

/**
 * A Chat Completions server on 127.0.0.1 that answers every request `delayMs` after it arrived,
 * with the JSON body `answer` gives for the request's body, and counts the requests in flight at
 * once: with one model request at a time per goal, that is a lower bound of the goals running at
 * once. Closed with the scope.
 */
export const busyModel = (delayMs: number, answer: (body: unknown) => unknown) =>
  Effect.acquireRelease(
    Effect.async<{ readonly baseUrl: string; readonly stats: BusyModelStats; readonly server: Http.Server }>((resume) => {
      const stats: BusyModelStats = { requests: 0, inFlight: 0, maxInFlight: 0, invalid: [] }
      const server = Http.createServer((req, res) => {
        stats.requests++
        stats.inFlight++
        stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight)
        let open = true
        // Out of flight once answered, or when the client gave up.
        const leave = () => {
          if (open) stats.inFlight--
          open = false
        }
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          let body: unknown
          try {
            body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
          } catch {
            body = null
          }
          const invalid = validate(body)
          if (invalid !== undefined) stats.invalid.push(invalid)
          const timer = setTimeout(() => {
            leave()
            res.writeHead(200, { "content-type": "application/json" })
            res.end(JSON.stringify(answer(body)))
          }, delayMs)
          res.on("close", () => {
            clearTimeout(timer)
            leave()
          })
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ baseUrl: `http://127.0.0.1:${port}/v1`, stats, server }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/** Processes whose command line holds `marker`. */
export const processesWith = (marker: string): ReadonlyArray<number> =>
  readdirSync("/proc").filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)
    } catch {
      return false
    }
  }).map(Number)
