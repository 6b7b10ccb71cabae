/**
 * A user and password in `--base-url` (`http://user:password@host/v1`): sent to the model server
 * as Basic credentials, and nowhere else: not in the log (its files' bytes), not in the progress
 * output, `rx events`, `rx inspect`, `rx config`, nor what `rx serve` and its API show. A resume
 * takes them from the flag or RX_BASE_URL again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, serveRx } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

const password = "s3cret-pw-7731"
const basic = `Basic ${Buffer.from(`alice:${password}`).toString("base64")}`

/** The base URL of `server` with the user and password in it. */
const withCredentials = (server: FakeServer.FakeServer) => server.baseUrl.replace("http://", `http://alice:${password}@`)

/** Every byte of the log's files. */
const logBytes = (db: string) => ["", "-wal", "-journal"].map((suffix) => `${db}${suffix}`).filter(existsSync).map((file) => readFileSync(file, "latin1")).join("")

describe("a base URL with a user and password", () => {
  it.scopedLive("is used for the requests, and shown or recorded nowhere; rx resume takes it from the flag or RX_BASE_URL again", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([FakeServer.error(503, "busy"), FakeServer.error(503, "still busy"), done("finished")])
      const box = sandbox()
      const url = withCredentials(model)
      const common = ["--db", box.db, "--workspace", box.workspace, "--model", "fake", "--sandbox", "none", "--retries", "0"]
      // The model is unavailable: the goal suspends, open.
      const ran = yield* rx(["run", "say hello", "--base-url", url, ...common])
      expect(ran.stdout + ran.stderr).toContain(`at ${model.baseUrl}`)
      expect(ran.stdout + ran.stderr).not.toContain(password)
      expect(model.received[0]?.headers.authorization).toBe(basic)
      const goalId = String(jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)[0]?.["goalId"])

      const events = yield* rx(["events", goalId, "--db", box.db])
      expect(events.stdout).toContain(`"baseUrl":"${model.baseUrl}"`)
      expect(jsonLines(events.stdout).map((e) => e["_tag"])).toContain("Suspended")
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.code, inspected.stderr).toBe(0)
      for (const shown of [events.stdout, inspected.stdout, logBytes(box.db)]) {
        expect(shown).not.toContain(password)
        expect(shown).not.toContain("alice")
      }

      // Without the flag the recorded URL, which has no credentials, is used.
      const bare = yield* rx(["resume", goalId, "--db", box.db, "--retries", "0"])
      expect(bare.stdout + bare.stderr).not.toContain(password)
      expect(model.received[1]?.headers.authorization).toBeUndefined()
      // RX_BASE_URL gives them again; recording nothing new (the URL without them is the recorded one).
      const again = yield* rx(["resume", goalId, "--db", box.db], { RX_BASE_URL: url })
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout + again.stderr).not.toContain(password)
      expect(model.received[2]?.headers.authorization).toBe(basic)
      const after = (yield* rx(["events", goalId, "--db", box.db])).stdout
      expect(jsonLines(after).some((e) => e["_tag"] === "OptionsChanged")).toBe(false)
      expect(after + logBytes(box.db)).not.toContain(password)
    }), 60_000)

  it.scopedLive("rx config shows it as ***", () =>
    Effect.gen(function*() {
      const url = `http://alice:${password}@127.0.0.1:9/v1`
      for (const json of [[], ["--json"]]) {
        const shown = yield* rx(["config", "--base-url", url, ...json])
        expect(shown.code, shown.stderr).toBe(0)
        expect(shown.stdout).toContain("http://***@127.0.0.1:9/v1")
        expect(shown.stdout).not.toContain(password)
      }
    }))

  it.scopedLive("rx serve uses it for its goals; its output, the API's goal view and events show it nowhere", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([done("served")])
      const box = sandbox()
      const { child, url } = yield* serveRx(box, withCredentials(model))
      const token = readFileSync(`${box.root}/rx-server.token`, "utf8").trim()
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
      const submitted = yield* Effect.promise(() => fetch(`${url}/v1/goals`, { method: "POST", headers, body: JSON.stringify({ goal: "hello" }) }).then((r) => r.json() as Promise<{ goalId: string }>))
      const events = yield* Effect.promise(() => fetch(`${url}/v1/goals/${submitted.goalId}/events`, { headers }).then((r) => r.text()))
      const view = yield* Effect.promise(() => fetch(`${url}/v1/goals/${submitted.goalId}`, { headers }).then((r) => r.text()))
      expect(jsonLines(events).at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(events).toContain(`"baseUrl":"${model.baseUrl}"`)
      expect(model.received[0]?.headers.authorization).toBe(basic)
      for (const shown of [events, view, child.output().stdout, child.output().stderr, logBytes(box.db)]) expect(shown).not.toContain(password)
    }), 60_000)
})
