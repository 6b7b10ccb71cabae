/**
 * @rx/server: rx over HTTP. `Api` is the HTTP API (an @effect/platform `HttpApi`) and
 * `ApiError` its error bodies; `Server` serves it on Node and runs the goals; `Toolbox` (of
 * @rx/tools) gives each goal the tools of its workspace; `Config` is the server's configuration; `Client` is a
 * typed client of a running server; `TokenFile` keeps a server's token in a file across restarts; `View` is
 * the one view of a goal's steps that `rx inspect`, its `--json` and the web inspector render.
 */
export * as Api from "./Api.js"
export * as ApiError from "./ApiError.js"
export * as Client from "./Client.js"
export * as Config from "./Config.js"
export * as Server from "./Server.js"
export * as TokenFile from "./TokenFile.js"
export * as View from "./View.js"
/** The tools cache of `@rx/tools`, re-exported: a server is given one as a Layer. */
export { Toolbox } from "@rx/tools"
