import { writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { Test } from 'tap'
import { hashPassword } from '../../lib/credentials.js'
import { PASSWORD, USER } from './gateway.js'

/** A credentials file for the test user, in the test's own folder. */
export async function credentialsFile(dir: string): Promise<string> {
  const file = join(dir, 'credentials.json')
  const password = await hashPassword(PASSWORD, { N: 1024, r: 8, p: 1 })
  await writeFile(file, JSON.stringify({ users: [{ username: USER, password, entities: ['default'] }] }))
  return file
}

/** A port held by another server until the test ends. */
export async function takenPort(t: Test): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return (server.address() as AddressInfo).port
}

/** A port that was free a moment ago: for a child process that must be told its ports up front. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Polls until `url` answers `status`; bounded (a child process under the TypeScript loader starts slowly). */
export async function poll(url: string, status: number): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    const got = await fetch(url).then(
      (res) => res.status,
      () => 0,
    )
    if (got === status) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`${url} never answered ${status}`)
}
