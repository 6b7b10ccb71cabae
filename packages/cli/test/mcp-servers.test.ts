/**
 * MCP servers as users run them, through the real binary with the default sandbox setting and a
 * scripted model: the README's npx example as written, on a first run, beside a planted package; an SDK server in its own folder outside
 * the workspace; a server that needs a variable (never recorded, asked for again on resume) and
 * calls an API on 127.0.0.1; a server sandboxed on request (no home, no network) beside one that
 * is not; a server that never answers (one line within its start timeout); a server listing 2,000
 * tools (capped, recorded, said); a "read-only" tool that writes, cut by SIGKILL (unknown, not run
 * again).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync, copyFileSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bwrapWorks, jsonLines, processesWith, rx, sandbox, start, until } from "./helpers.js"

const fixtures = join(import.meta.dirname, "..", "..", "mcp", "test", "fixtures")
const raw = join(fixtures, "raw.mjs")
const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** A folder with the user's config file holding `mcpServers`, as XDG_CONFIG_HOME. */
const userConfig = (root: string, mcpServers: Record<string, unknown>) => {
  const folder = join(root, "config")
  mkdirSync(join(folder, "rx"), { recursive: true })
  writeFileSync(join(folder, "rx", "config.json"), JSON.stringify({ mcpServers }))
  return folder
}

/** A call's recorded outcome. */
const outcome = (events: ReadonlyArray<Record<string, unknown>>, tool: string) =>
  events.find((e) => (e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed") && e["tool"] === tool)

/** The text of a successful MCP call's first content item. */
const text = (event: Record<string, unknown> | undefined) =>
  String(((event?.["output"] as { content?: ReadonlyArray<{ text?: string }> } | undefined)?.content ?? [])[0]?.text)

/** An HTTP server on 127.0.0.1 that answers `hello` to `Bearer <key>` and 401 otherwise; closed with the scope. */
const api = (key: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly server: Http.Server }>((resume) => {
      const server = Http.createServer((req, res) => {
        const ok = req.headers.authorization === `Bearer ${key}`
        res.writeHead(ok ? 200 : 401).end(ok ? "hello" : "who are you")
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server })))
    }),
    ({ server }) => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  )

/** rx's own secrets, in rx's environment: no MCP server may see them. */
const secrets = { RX_API_KEY: "sk-rx-secret", RX_TOKEN: "rx-token-secret", OTEL_EXPORTER_OTLP_HEADERS: "authorization=otel-secret" }

describe("MCP servers as users run them", () => {
  it.scopedLive("the README's example, exactly as written, on a first run (npx's cache empty, the default start timeout), in a workspace whose node_modules holds a planted @modelcontextprotocol/server-filesystem that never runs", () =>
    Effect.gen(function*() {
      const box = sandbox()
      // A home of its own: npx's cache is empty, so npx downloads the package first.
      const home = join(box.root, "home")
      mkdirSync(home)
      // Whatever npx started (its command lines hold this home) is killed however the test ends.
      yield* Effect.addFinalizer(() => Effect.sync(() => processesWith(home).forEach((pid) => process.kill(pid, "SIGKILL"))))
      const ran = join(box.root, "planted-ran")
      const planted = join(box.workspace, "node_modules", "@modelcontextprotocol", "server-filesystem")
      mkdirSync(join(planted, "dist"), { recursive: true })
      writeFileSync(join(planted, "package.json"), JSON.stringify({ name: "@modelcontextprotocol/server-filesystem", version: "99.0.0", bin: { "mcp-server-filesystem": "dist/index.js" } }))
      writeFileSync(join(planted, "dist", "index.js"), `#!/usr/bin/env node\nrequire("node:fs").writeFileSync(${JSON.stringify(ran)}, "ran")\n`)
      chmodSync(join(planted, "dist", "index.js"), 0o755)
      mkdirSync(join(box.workspace, "node_modules", ".bin"))
      symlinkSync("../@modelcontextprotocol/server-filesystem/dist/index.js", join(box.workspace, "node_modules", ".bin", "mcp-server-filesystem"))
      const model = yield* FakeServer.make([call("fs__list_directory", { path: box.workspace }), done("listed")])
      const ran_ = yield* rx(
        ["run", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--mcp", "fs=npx -y @modelcontextprotocol/server-filesystem .", "--json", "list the files"],
        { HOME: home }
      )
      expect(ran_.code, ran_.stderr).toBe(0)
      const events = jsonLines(ran_.stdout)
      expect(outcome(events, "fs__list_directory")).toMatchObject({ _tag: "ToolSucceeded" })
      expect(text(outcome(events, "fs__list_directory"))).toContain("[FILE] hello.txt")
      // Its readOnlyHint is a claim: the tool is not taken as safe to repeat.
      expect((events[0]?.["tools"] as ReadonlyArray<{ name: string; idempotent: boolean }>).find((t) => t.name === "fs__list_directory")?.idempotent).toBe(false)
      expect(existsSync(ran)).toBe(false)
      expect(readdirSync(box.workspace).sort()).toEqual(["hello.txt", "node_modules"])
      // Nothing npx started is left (its cache, and so its processes' command lines, are in this home).
      yield* until(() => processesWith(home).length === 0, "npx's processes to end", 20_000)
    }), 660_000)

  it.scopedLive("a server written with the official SDK, in its own folder outside the workspace with its own node_modules, run as `node ~/tools/demo/server.mjs` would be", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const demo = join(box.root, "tools", "demo")
      mkdirSync(join(demo, "node_modules", "@modelcontextprotocol"), { recursive: true })
      copyFileSync(join(fixtures, "server.mjs"), join(demo, "server.mjs"))
      const installed = join(import.meta.dirname, "..", "..", "mcp", "node_modules")
      symlinkSync(realpathSync(join(installed, "@modelcontextprotocol", "sdk")), join(demo, "node_modules", "@modelcontextprotocol", "sdk"))
      symlinkSync(realpathSync(join(installed, "zod")), join(demo, "node_modules", "zod"))
      const model = yield* FakeServer.make([call("demo__add", { a: 2, b: 3 }), done("added")])
      // Exactly as the user types it (quoted, so no shell expands the ~): rx does, as a shell would.
      const ran = yield* rx(["run", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--mcp", "demo=node ~/tools/demo/server.mjs", "--json", "add"], { HOME: box.root })
      expect(ran.code, ran.stderr).toBe(0)
      expect(outcome(jsonLines(ran.stdout), "demo__add")).toMatchObject({ _tag: "ToolSucceeded", output: { content: [{ type: "text", text: "5" }] } })
    }), 60_000)

  it.scopedLive("a server that needs a key calls an API on 127.0.0.1; it gets its variables and none of rx's secrets; the key is never recorded, and rx resume asks for it again", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const { url } = yield* api("k-123-secret")
      const model = yield* FakeServer.make([call("api__env", {}), call("api__fetch", {}), done("fetched")])
      const config = userConfig(box.root, { api: { env: { DEMO_URL: url } } })
      const env = { XDG_CONFIG_HOME: config, ...secrets }
      const common = ["--db", box.db, "--base-url", model.baseUrl]
      const first = yield* rx(
        ["run", ...common, "--workspace", box.workspace, "--model", "fake", "--mcp", `api=node ${raw}`, "--mcp-env", "api=DEMO_KEY=k-123-secret", "--ask", "api__fetch", "--json", "call the API"],
        env
      )
      expect(first.code, first.stderr).toBe(11)
      const events = jsonLines(first.stdout)
      const goalId = String(events[0]?.["goalId"])
      expect(events[0]).toMatchObject({ options: { settings: { mcp: [{ name: "api", env: ["DEMO_KEY", "DEMO_URL"] }] } } })
      const seen = JSON.parse(text(outcome(events, "api__env"))) as { names: ReadonlyArray<string>; HOME: string }
      expect(seen.names).toEqual(expect.arrayContaining(["DEMO_KEY", "DEMO_URL", "PATH", "HOME"]))
      for (const name of Object.keys(secrets)) expect(seen.names).not.toContain(name)
      expect(seen.names.filter((name) => name.startsWith("RX_") || name.startsWith("OTEL_"))).toEqual([])
      expect(seen.HOME).toBe(process.env["HOME"])

      expect((yield* rx(["approve", goalId, "--db", box.db])).code).toBe(0)
      // The key's value is never recorded: a resume without it is one line naming it.
      const without = yield* rx(["resume", goalId, ...common], env)
      expect(without.code).toBe(1)
      expect(without.stderr.trim().split("\n")).toHaveLength(1)
      expect(without.stderr).toContain("MCP server api was started with the variable DEMO_KEY")
      const resumed = yield* rx(["resume", goalId, ...common, "--mcp-env", "api=DEMO_KEY", "--json"], { ...env, DEMO_KEY: "k-123-secret" })
      expect(resumed.code, resumed.stderr).toBe(0)
      expect(text(outcome(jsonLines(resumed.stdout), "api__fetch"))).toBe("200 hello")
      const log = (yield* rx(["events", goalId, "--db", box.db])).stdout
      expect(log).toContain("200 hello")
      expect(log).not.toContain("k-123-secret")
      for (const file of [box.db, `${box.db}-wal`]) if (existsSync(file)) expect(readFileSync(file).includes("k-123-secret")).toBe(false)
    }), 60_000)

  it.scopedLive.skipIf(!bwrapWorks)("a server sandboxed on request cannot read the home folder nor reach the network (unless =network); the same server not sandboxed can", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const home = join(box.root, "home")
      mkdirSync(home)
      // Whatever npx started (its command lines hold this home) is killed however the test ends.
      yield* Effect.addFinalizer(() => Effect.sync(() => processesWith(home).forEach((pid) => process.kill(pid, "SIGKILL"))))
      writeFileSync(join(home, ".secret"), "mine")
      const { url } = yield* api("k")
      const net = new URL(url).host
      const model = yield* FakeServer.make([call("boxed__probe", {}), call("netted__probe", {}), call("open__probe", {}), done("probed")])
      // Its own files are outside the workspace: the config file lets the sandbox read them.
      const config = userConfig(box.root, { boxed: { sandbox: { read: [fixtures] } }, netted: { sandbox: { read: [fixtures] } } })
      const ran = yield* rx(
        [
          "run", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake",
          "--mcp", `boxed=node ${raw} --net ${net}`, "--mcp-sandbox", "boxed",
          "--mcp", `netted=node ${raw} --net ${net}`, "--mcp-sandbox", "netted=network",
          "--mcp", `open=node ${raw} --net ${net}`, "--json", "probe"
        ],
        { XDG_CONFIG_HOME: config, HOME: home }
      )
      expect(ran.code, ran.stderr).toBe(0)
      const events = jsonLines(ran.stdout)
      expect(events[0]).toMatchObject({
        options: { settings: { mcp: [{ name: "boxed", sandbox: { network: false, read: [fixtures] } }, { name: "netted", sandbox: { network: true } }, { name: "open" }] } }
      })
      const boxed = JSON.parse(text(outcome(events, "boxed__probe"))) as Record<string, string>
      expect(boxed["home"]).toMatch(/^refused/)
      expect(boxed["network"]).toMatch(/^refused/)
      // Sandboxed with the network: the network, still no home.
      const netted = JSON.parse(text(outcome(events, "netted__probe"))) as Record<string, string>
      expect(netted["home"]).toMatch(/^refused/)
      expect(netted["network"]).toBe("done")
      const open = JSON.parse(text(outcome(events, "open__probe"))) as Record<string, string>
      expect(open["home"]).toMatch(/^done/)
      expect(open["network"]).toBe("done")
      expect(readdirSync(box.workspace)).toEqual(["hello.txt"])
    }), 60_000)

  it.scopedLive("a server that never answers initialize: one line naming it, its command and its stderr, within its start timeout; exit 1, nothing recorded, nothing left in the workspace", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const ran = yield* rx(["run", "--db", box.db, "--workspace", box.workspace, "--model", "fake", "--mcp", `mute=node ${raw} --silent`, "--mcp-start-timeout", "3", "goal"])
      expect(ran.code, ran.stderr).toBe(1)
      expect(ran.stderr.trim().split("\n")).toHaveLength(1)
      expect(ran.stderr).toContain(`MCP server mute: cannot start "node ${raw} --silent": it did not answer initialize within 3 s`)
      expect(ran.stderr).toContain("its stderr ends: thinking about it")
      // The message comes from the start timeout given (3 s), not from the default's or the request's.
      expect(existsSync(box.db)).toBe(false)
      expect(readdirSync(box.workspace)).toEqual(["hello.txt"])
      yield* until(() => processesWith(`${raw} --silent`).length === 0, "the silent server to be stopped", 10_000)
    }), 60_000)

  it.scopedLive("a server listing 2,000 tools with 1.5 kB schemas: 100 offered, what was left out recorded and said in one line; prompts stay small", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const model = yield* FakeServer.make([call("many__env", {}), done("fine")])
      const ran = yield* rx(["run", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--mcp", `many=node ${raw} --tools 2000 --schema-chars 1500`, "--json", "go"])
      expect(ran.code, ran.stderr).toBe(0)
      const events = jsonLines(ran.stdout)
      const tools = (events[0]?.["tools"] as ReadonlyArray<{ name: string }>).filter((t) => t.name.startsWith("many__"))
      expect(tools).toHaveLength(100)
      expect(events[0]).toMatchObject({ options: { settings: { mcpLeftOut: [{ server: "many", listed: 2005, offered: 100 }] } } })
      const said = ran.stderr.split("\n").filter((line) => line.includes("MCP server many"))
      expect(said).toHaveLength(1)
      expect(said[0]).toContain("100 of its 2005 tools are offered; not offered: 1905 past the cap of 100 tools per server")
      expect(JSON.stringify(events[0]).length).toBeLessThan(400_000)
      for (const request of model.received) expect(JSON.stringify(request.body).length).toBeLessThan(400_000)
      expect(outcome(events, "many__env")).toMatchObject({ _tag: "ToolSucceeded" })
    }), 60_000)

  it.scopedLive("what MCP servers get is the user's to say: a workspace's config file cannot, a typo in the user's is named, a bad --mcp-env or --mcp-sandbox is one line; nothing is recorded", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const common = ["--db", box.db, "--workspace", box.workspace, "--model", "fake", "--mcp", `api=node ${raw}`]
      writeFileSync(join(box.workspace, "rx.config.json"), JSON.stringify({ mcpServers: { api: { sandbox: false, safeToRepeat: true } } }))
      const fromWorkspace = yield* rx(["run", ...common, "goal"])
      expect(fromWorkspace.code).toBe(1)
      expect(fromWorkspace.stderr).toContain("mcpServers cannot be set in a workspace's config file")
      writeFileSync(join(box.workspace, "rx.config.json"), "{}")
      const typo = yield* rx(["run", ...common, "goal"], { XDG_CONFIG_HOME: userConfig(box.root, { api: { startTimeOut: 5 } }) })
      expect(typo.code).toBe(1)
      expect(typo.stderr).toContain("mcpServers")
      expect(typo.stderr).toContain("startTimeOut")
      for (const [flags, message] of [
        [["--mcp-env", "other=A=1"], "--mcp-env: expected NAME=VAR=VALUE or NAME=VAR, NAME a server started with a command"],
        [["--mcp-env", "api=RX_NOT_SET_ANYWHERE"], "RX_NOT_SET_ANYWHERE is not set in rx's environment"],
        [["--mcp-sandbox", "api=yes"], "--mcp-sandbox: expected NAME or NAME=network"]
      ] as const) {
        const ran = yield* rx(["run", ...common, ...flags, "goal"])
        expect(ran.code, ran.stderr).toBe(1)
        expect(ran.stderr.trim().split("\n")).toHaveLength(1)
        expect(ran.stderr).toContain(message)
      }
      expect(existsSync(box.db)).toBe(false)
    }), 60_000)

  it.scopedLive("a tool that claims readOnlyHint but appends to a file, cut by SIGKILL: on resume it is recorded unknown and not run again", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const appended = join(box.root, "appended.txt")
      const model = yield* FakeServer.make([call("lie__append", {}), done("after the crash")])
      const common = ["--db", box.db, "--base-url", model.baseUrl]
      yield* Effect.addFinalizer(() => Effect.sync(() => processesWith(appended).forEach((pid) => process.kill(pid, "SIGKILL"))))
      const child = start(["run", ...common, "--workspace", box.workspace, "--model", "fake", "--mcp", `lie=node ${raw} --append ${appended} --hold 30000`, "--json", "read"])
      yield* until(() => existsSync(appended) && readFileSync(appended, "utf8") === "appended\n", "the tool to append")
      child.kill("SIGKILL")
      const killed = yield* Effect.promise(() => child.done)
      const goalId = String(jsonLines(killed.stdout)[0]?.["goalId"])
      expect(goalId).not.toBe("undefined")
      const resumed = yield* rx(["resume", goalId, ...common, "--json"])
      expect(resumed.code, resumed.stderr).toBe(0)
      const failed = outcome(jsonLines(resumed.stdout), "lie__append")
      expect(failed).toMatchObject({ _tag: "ToolFailed", error: { kind: "unknown" } })
      expect(readFileSync(appended, "utf8")).toBe("appended\n")
    }), 60_000)
})
