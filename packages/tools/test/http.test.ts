import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { HttpFetch } from "../src/index.js"
import * as Ip from "../src/internal/ip.js"
import { failed, invoke, makeDirs, ok, withTools } from "./helpers.js"

/** A real server on 127.0.0.1 for the duration of one test. */
const withServer = <A, E, R>(use: (base: string, port: number) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.promise(() =>
      new Promise<http.Server>((resolve) => {
        const server = http.createServer((req, res) => {
          const url = new URL(req.url ?? "/", "http://x")
          const port = (server.address() as AddressInfo).port
          if (url.pathname === "/ok") return res.end("hello")
          if (url.pathname === "/echo") {
            let body = ""
            req.on("data", (chunk: Buffer) => (body += chunk.toString()))
            req.on("end", () => {
              res.setHeader("content-type", "application/json")
              res.end(JSON.stringify({ method: req.method, header: req.headers["x-test"] ?? null, auth: req.headers["authorization"] ?? null, type: req.headers["content-type"] ?? null, body }))
            })
            return
          }
          if (url.pathname === "/to-literal") {
            res.writeHead(302, { location: `http://127.0.0.1:${port}/ok` })
            return res.end()
          }
          if (url.pathname === "/to-localhost-echo") {
            res.writeHead(307, { location: `http://localhost:${port}/echo` })
            return res.end()
          }
          if (url.pathname === "/to-ok") {
            res.writeHead(301, { location: "/ok" })
            return res.end()
          }
          if (url.pathname === "/loop") {
            res.writeHead(302, { location: "/loop" })
            return res.end()
          }
          if (url.pathname === "/post-redirect") {
            res.writeHead(303, { location: "/echo" })
            return res.end()
          }
          if (url.pathname === "/big") {
            res.setHeader("content-type", "text/plain")
            return res.end("z".repeat(1_000_000))
          }
          if (url.pathname === "/binary") {
            res.setHeader("content-type", "application/octet-stream")
            return res.end(Buffer.from([0, 1, 2, 3]))
          }
          if (url.pathname === "/hang") return
          res.statusCode = 404
          res.end("not found")
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    (server) => {
      const port = (server.address() as AddressInfo).port
      return use(`http://127.0.0.1:${port}`, port)
    },
    (server) => Effect.sync(() => server.closeAllConnections()).pipe(Effect.zipRight(Effect.promise(() => new Promise((r) => server.close(r)))))
  )

const setup = (httpAllow: ReadonlyArray<string> = [], extra: Record<string, number> = {}) => {
  const dirs = makeDirs()
  return { ...dirs, config: { workspace: dirs.ws, sandbox: "none" as const, httpAllow, ...extra } }
}

describe("http_fetch", () => {
  it.live("refuses a loopback server by default, by address and by name", () =>
    withServer((base, port) =>
      Effect.gen(function*() {
        const { cleanup, config } = setup()
        for (const url of [`${base}/ok`, `http://localhost:${port}/ok`, `http://[::ffff:127.0.0.1]:${port}/ok`, `http://2130706433:${port}/ok`, `http://0.0.0.0:${port}/ok`, `http://[::1]:${port}/ok`]) {
          const failure = failed(yield* withTools(config, invoke("http_fetch", { url })))
          expect(failure.kind, url).toBe("recoverable")
          expect(failure.message, url).toContain("refused")
          expect(failure.details, url).toMatchObject({ _tag: "@rx/tools/AddressRefused" })
        }
        cleanup()
      })
    ))

  it.live("fetches it when the allow-list permits it", () =>
    withServer((base, port) =>
      Effect.gen(function*() {
        for (const allow of ["127.0.0.1", "127.0.0.0/8", "localhost"]) {
          const { cleanup, config } = setup([allow])
          const url = allow === "localhost" ? `http://localhost:${port}/ok` : `${base}/ok`
          const out = ok(yield* withTools(config, invoke("http_fetch", { url })))
          expect(out["status"], allow).toBe(200)
          expect(out["body"]).toBe("hello")
          expect(out["truncated"]).toBe(false)
          cleanup()
        }
        const { cleanup, config } = setup(["10.0.0.0/8"])
        expect(failed(yield* withTools(config, invoke("http_fetch", { url: `${base}/ok` }))).message).toContain("loopback")
        cleanup()
      })
    ))

  it.live("checks every redirect again", () =>
    withServer((base, port) =>
      Effect.gen(function*() {
        // localhost is allowed by name; the redirect to the 127.0.0.1 literal is not.
        const named = setup(["localhost"])
        const refused = failed(yield* withTools(named.config, invoke("http_fetch", { url: `http://localhost:${port}/to-literal` })))
        expect(refused.message).toContain("refused")
        expect(refused.details).toMatchObject({ _tag: "@rx/tools/AddressRefused", host: "127.0.0.1" })
        named.cleanup()
        const { cleanup, config } = setup(["127.0.0.1"])
        const followed = ok(yield* withTools(config, invoke("http_fetch", { url: `${base}/to-ok` })))
        expect(followed["status"]).toBe(200)
        expect(followed["body"]).toBe("hello")
        expect(followed["final_url"]).toBe(`${base}/ok`)
        expect(followed["redirects"]).toEqual([`${base}/ok`])
        // Credentials do not follow a redirect to another origin.
        const both = setup(["127.0.0.1", "localhost"])
        const crossed = ok(yield* withTools(both.config, invoke("http_fetch", {
          url: `${base}/to-localhost-echo`,
          headers: { authorization: "Bearer t", "x-test": "kept" }
        })))
        expect(JSON.parse(String(crossed["body"]))).toMatchObject({ auth: null, header: "kept" })
        const same = ok(yield* withTools(both.config, invoke("http_fetch", { url: `${base}/post-redirect`, headers: { authorization: "Bearer t" } })))
        expect(JSON.parse(String(same["body"]))).toMatchObject({ auth: "Bearer t" })
        both.cleanup()
        const loop = failed(yield* withTools(config, invoke("http_fetch", { url: `${base}/loop` })))
        expect(loop.message).toContain("more than 5 redirects")
        cleanup()
      })
    ))

  it.live("sends method, headers and body; a 404 is a result", () =>
    withServer((base) =>
      Effect.gen(function*() {
        const { cleanup, config } = setup(["127.0.0.1"])
        const out = ok(yield* withTools(config, invoke("http_fetch", {
          url: `${base}/echo`,
          method: "POST",
          headers: { "x-test": "yes", "Content-Type": "application/json" },
          body: "{\"a\":1}"
        })))
        expect(JSON.parse(String(out["body"]))).toEqual({ method: "POST", header: "yes", auth: null, type: "application/json", body: "{\"a\":1}" })
        expect(out["content_type"]).toBe("application/json")
        const seeOther = ok(yield* withTools(config, invoke("http_fetch", { url: `${base}/post-redirect`, method: "POST", body: "x" })))
        expect(JSON.parse(String(seeOther["body"]))).toMatchObject({ method: "GET", body: "" })
        const missing = ok(yield* withTools(config, invoke("http_fetch", { url: `${base}/nothing` })))
        expect(missing["status"]).toBe(404)
        const getWithBody = failed(yield* withTools(config, invoke("http_fetch", { url: `${base}/ok`, body: "x" })))
        expect(getWithBody.kind).toBe("recoverable")
        cleanup()
      })
    ))

  it.live("caps the body, reports binary bodies, and times out", () =>
    withServer((base) =>
      Effect.gen(function*() {
        const { cleanup, config } = setup(["127.0.0.1"], { httpMaxBytes: 1000, httpTimeoutMs: 1000 })
        const big = ok(yield* withTools(config, invoke("http_fetch", { url: `${base}/big` })))
        expect(big["truncated"]).toBe(true)
        expect(big["body"]).toBe("z".repeat(1000))
        expect(big["body_bytes"]).toBe(1000)
        const binary = ok(yield* withTools(config, invoke("http_fetch", { url: `${base}/binary` })))
        expect(binary["binary"]).toBe(true)
        expect(binary["body"]).toBe("")
        const started = Date.now()
        const hang = failed(yield* withTools(config, invoke("http_fetch", { url: `${base}/hang` })))
        expect(hang.message).toContain("timed out")
        expect(Date.now() - started).toBeLessThan(5_000)
        const scheme = failed(yield* withTools(config, invoke("http_fetch", { url: "file:///etc/passwd" })))
        expect(scheme.message).toContain("http")
        cleanup()
      })
    ))
})

describe("address classification", () => {
  const reason = (address: string) => HttpFetch.refusal(HttpFetch.policy([]), "example.test", address)
  it("refuses what is not the public internet", () => {
    for (const address of [
      "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
      "0.0.0.0", "100.64.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "::ffff:127.0.0.1", "::ffff:7f00:1",
      "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "224.0.0.1", "255.255.255.255"
    ]) {
      expect(reason(address), address).toBeDefined()
    }
  })
  it("accepts public addresses", () => {
    for (const address of ["93.184.216.34", "8.8.8.8", "172.32.0.1", "2606:2800:220:1:248:1893:25c8:1946", "::ffff:8.8.8.8"]) {
      expect(reason(address), address).toBeUndefined()
    }
  })
  it("honours allowed hosts and ranges", () => {
    const rules = HttpFetch.policy(["localhost", "10.0.0.0/8", "::1"])
    expect(HttpFetch.refusal(rules, "localhost", "127.0.0.1")).toBeUndefined()
    expect(HttpFetch.refusal(rules, "x", "10.9.9.9")).toBeUndefined()
    expect(HttpFetch.refusal(rules, "x", "::1")).toBeUndefined()
    expect(HttpFetch.refusal(rules, "x", "127.0.0.1")).toBe("loopback")
    expect(Ip.parseRange("10.0.0.0/33")).toBeUndefined()
  })
})
