import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express, { type Router } from 'express'
import Fastify, { type FastifyInstance } from 'fastify'
import fc from 'fast-check'
import { Hono } from 'hono'
import t, { type Test } from 'tap'
import type { Gate } from '../../lib/gate.js'
import { CASES } from '../helpers/cases.js'
import { RECURRING_PATH, SALE_PATH } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { honoServer } from '../helpers/hono-app.js'
import { keepAliveAgent, send } from '../helpers/http.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'

/**
 * Mounts on every middleware surface (docs/middleware-reference.md, mounts): generated layouts of nested
 * Express routers, Fastify plugins with prefixes, Hono sub-apps (`app.route`, `basePath`) and a plain
 * node router, with fixed and parameterised mount points, mount points spelt otherwise than the
 * router reads them (`/V6`, `/api/`), the gate at any level above the payment route (and, on
 * Express, on the route itself), with and without `basePath`. The oracle is the framework itself:
 * whenever the application's handler for a payment route runs, the gate's checks ran first (its
 * `paymentsGate` context is set); so an unauthenticated payment never reaches it, and a clean one
 * does, checked.
 */

const CLEAN = { sale: CASES[0]!, recurring: CASES[1]! }
const { authorization: _, ...ANONYMOUS } = CLEAN.sale.headers
const OPERATIONS = { sale: SALE_PATH, recurring: RECURRING_PATH }

/** A mount point, and a value for each of its parameters. */
const MOUNT = fc.constantFrom('/v6', '/V6', '/api/', '/:tenant', '/a/b', '/:org/x')
/**
 * A parameter's value as a client may spell it: plainly, or with an escape a reader may decode and
 * cut the path at (`?`, `#`, NUL), a slash or backslash, a dot segment, a parameter, a suffix, twice encoded.
 */
const VALUE = fc.constantFrom(
  'acme',
  'o-1',
  'a%23',
  'a%3F',
  'a%3fb',
  'a%00',
  'a%2523',
  'a%2F',
  'a%5C',
  '%2e%2e',
  'a;b=1',
  'a.b',
  'a%20',
)

interface Layout {
  readonly mounts: readonly string[]
  /** How many mount points lie above the gate: the gate is in the router, plugin or app at that depth. */
  readonly gateDepth: number
  readonly operation: 'sale' | 'recurring'
  /** Whether the gate's `basePath` names the mount points (when they are fixed), or is left empty. */
  readonly withBasePath: boolean
  /** Express: the gate on the payment route itself rather than on a router; Hono: `use('/payments/*')` rather than `use('*')`. */
  readonly onRoute: boolean
  /** The value sent for `:tenant` and for `:org`. */
  readonly values: Readonly<Record<string, string>>
}

const LAYOUT: fc.Arbitrary<Layout> = fc
  .record({
    mounts: fc.array(MOUNT, { maxLength: 3 }),
    gateDepth: fc.nat(3),
    operation: fc.constantFrom('sale' as const, 'recurring' as const),
    withBasePath: fc.boolean(),
    onRoute: fc.boolean(),
    values: fc.record({ ':tenant': VALUE, ':org': VALUE }),
  })
  .map((layout) => ({ ...layout, gateDepth: Math.min(layout.gateDepth, layout.mounts.length) }))

/** The path a client sends to reach the payment route: parameters filled in, one slash between parts. */
function pathOf(layout: Layout): string {
  const front = layout.mounts
    .map((mount) =>
      mount
        .split('/')
        .map((part) => layout.values[part] ?? part)
        .join('/')
        .replace(/\/$/, ''),
    )
    .join('')
  return `${front}${OPERATIONS[layout.operation]}`
}

/** Whether every parameter the layout's mount points hold is given a plain value. */
function plain(layout: Layout): boolean {
  return layout.mounts.every((mount) =>
    mount.split('/').every((part) => !part.startsWith(':') || /^[a-z0-9-]+$/.test(layout.values[part] as string)),
  )
}

/** The gate's basePath for a layout: its mount points from the root, when they are all fixed, or empty. */
function basePathOf(layout: Layout): string {
  const fixed = layout.mounts.every((mount) => !mount.includes(':'))
  return layout.withBasePath && fixed ? layout.mounts.map((mount) => mount.replace(/\/$/, '')).join('') : ''
}

/** What a handler for the payment route saw: called, and whether the gate had checked the request first. */
class Handled {
  calls = 0
  unchecked = 0
  record(context: unknown): void {
    this.calls++
    if (context === undefined) this.unchecked++
  }
}

interface Served {
  readonly port: number
  close(): Promise<void>
}

async function listening(server: Server): Promise<Served> {
  return { port: await listenOnLoopback(server), close: () => closeServer(server) }
}

/** Express: a router per mount point, each mounted in the one above; the gate on the router at its depth, or on the route. */
function expressApp(gate: Gate, layout: Layout, handled: Handled): Promise<Served> {
  const app = express()
  const routers: Router[] = [app, ...layout.mounts.map(() => express.Router())]
  const route = routers.at(-1) as Router
  if (!layout.onRoute) routers[layout.gateDepth]!.use(gate.express())
  const handler: express.RequestHandler = (req, res) => {
    handled.record(req.paymentsGate)
    res.status(201).end()
  }
  if (layout.onRoute) route.post(OPERATIONS[layout.operation], gate.express(), handler)
  else route.post(OPERATIONS[layout.operation], handler)
  layout.mounts.forEach((mount, at) => routers[at]!.use(mount, routers[at + 1]!))
  return listening(createServer(app))
}

/** Fastify: a plugin per mount point, each registered with its prefix in the one above; the gate registered at its depth. */
async function fastifyApp(gate: Gate, layout: Layout, handled: Handled): Promise<Served> {
  const app = Fastify()
  const level = async (instance: FastifyInstance, depth: number): Promise<void> => {
    if (depth === layout.gateDepth) await instance.register(gate.fastify)
    if (depth === layout.mounts.length) {
      instance.post(OPERATIONS[layout.operation], async (request, reply) => {
        handled.record(request.paymentsGate)
        return reply.code(201).send()
      })
      return
    }
    await instance.register((child) => level(child, depth + 1), { prefix: layout.mounts[depth] as string })
  }
  await level(app, 0)
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { port: (app.server.address() as AddressInfo).port, close: () => app.close() }
}

/**
 * Hono: a sub-app per mount point, each mounted in the one above with `app.route()`, the deepest as
 * `new Hono().basePath()` when its mount point is fixed; the gate on the app at its depth, with
 * `use('*')`, or with `use('/payments/*')` on the deepest app.
 */
async function honoApp(t: Test, gate: Gate, layout: Layout, handled: Handled): Promise<Served> {
  const depth = layout.mounts.length
  const last = layout.mounts.at(-1)
  const asBasePath = last !== undefined && !last.includes(':') && layout.onRoute
  const apps: Hono[] = layout.mounts.map(() => new Hono())
  apps.push(asBasePath ? new Hono().basePath(last) : new Hono())
  const mounted = (at: number) => (at === depth - 1 && asBasePath ? '/' : (layout.mounts[at] as string))
  if (layout.onRoute && layout.gateDepth === depth) apps[depth]!.use('/payments/*', gate.hono())
  else apps[layout.gateDepth]!.use('*', gate.hono())
  apps[depth]!.post(OPERATIONS[layout.operation], (c) => {
    handled.record(c.get('paymentsGate'))
    return c.body(null, 201)
  })
  // app.route() copies the routes a sub-app has when it is called: from the deepest up.
  for (let at = depth - 1; at >= 0; at--) apps[at]!.route(mounted(at), apps[at + 1]!)
  const { server, port } = await honoServer(t, apps[0]!)
  return { port, close: () => closeServer(server) }
}

/** Plain node: the application's own router, which reads the path as node's documentation shows and matches its mount points. */
function nodeApp(gate: Gate, layout: Layout, handled: Handled): Promise<Served> {
  const pattern = new RegExp(
    `^${layout.mounts
      .map((mount) => mount.replace(/\/$/, '').replace(/:\w+/g, '[^/]+'))
      .join('')}${OPERATIONS[layout.operation]}/?$`,
  )
  const app = gate.handler((req: IncomingMessage, res, passed) => {
    if (!pattern.test(new URL(req.url as string, 'http://x').pathname)) {
      res.statusCode = 404
      return res.end()
    }
    handled.record(passed)
    res.statusCode = 201
    res.end()
  })
  return listening(createServer(app))
}

const SURFACES = {
  node: (_t: Test, gate: Gate, layout: Layout, handled: Handled) => nodeApp(gate, layout, handled),
  express: (_t: Test, gate: Gate, layout: Layout, handled: Handled) => expressApp(gate, layout, handled),
  fastify: (_t: Test, gate: Gate, layout: Layout, handled: Handled) => fastifyApp(gate, layout, handled),
  hono: honoApp,
}

for (const [surface, build] of Object.entries(SURFACES)) {
  t.test(`${surface}: the payment route runs only after the gate's checks, whatever the mount`, async (t) => {
    const gates = new Map<string, Gate>()
    const gateFor = async (basePath: string) => {
      if (!gates.has(basePath)) gates.set(basePath, await testGate(t, { basePath }))
      return gates.get(basePath) as Gate
    }
    const agent = keepAliveAgent(t)
    await fc.assert(
      fc.asyncProperty(LAYOUT, async (layout) => {
        const handled = new Handled()
        const served = await build(t, await gateFor(basePathOf(layout)), layout, handled)
        try {
          const path = pathOf(layout)
          const clean = CLEAN[layout.operation]
          const anonymous = await send(served.port, { path, headers: ANONYMOUS, body: clean.body }, agent)
          // Spellings a router may take to the same route (Express ignores case and a trailing slash).
          for (const respelt of [`${path}/`, path.toUpperCase(), `${path};x=1`]) {
            const status = (await send(served.port, { path: respelt, headers: ANONYMOUS, body: clean.body }, agent))
              .status
            if (![401, 404].includes(status)) return false
          }
          const before = handled.calls
          const passed = await send(served.port, { ...clean, path }, agent)
          // A value spelt plainly reaches the route, checked; another may be refused (400) or routed nowhere
          // (404) by the gate or the framework, but never reach the route unchecked.
          if (!plain(layout)) return handled.unchecked === 0 && anonymous.status !== 201
          return (
            anonymous.status === 401 && passed.status === 201 && handled.calls === before + 1 && handled.unchecked === 0
          )
        } finally {
          await served.close()
        }
      }),
      runs(0.1),
    )
  })
}
