/** Certificates made for a test with `openssl` (Debian's /usr/bin/openssl): a CA, servers, a client, an expired and a wrong-name one. */
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

async function openssl(dir: string, args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir }).catch((error: NodeJS.ErrnoException) => {
    throw new Error(
      error.code === 'ENOENT' ? 'the TLS tests need openssl on PATH (Debian: apt-get install openssl)' : error.message,
    )
  })
}

/** A certificate and its key, as files. */
export interface PemFiles {
  readonly cert: string
  readonly key: string
}

export interface IssueOptions {
  /** Subject alternative names, e.g. `DNS:localhost,IP:127.0.0.1`. */
  readonly names?: string
  /** Days valid; negative: expired that many days ago. */
  readonly days?: number
  /** A client certificate (extendedKeyUsage clientAuth) rather than a server's. */
  readonly client?: boolean
  /** Self-signed rather than signed by the CA. */
  readonly selfSigned?: boolean
  /** Valid only from this many days on (a certificate not yet valid), for a day; signed by the CA with `openssl ca`, which can set a start date. */
  readonly startsInDays?: number
}

/** A time `days` from now as `openssl ca` takes it: YYYYMMDDHHMMSSZ. */
function opensslTime(days: number): string {
  return `${new Date(Date.now() + days * 86_400_000).toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`
}

export interface TestPki {
  readonly dir: string
  /** The CA's certificate, a PEM bundle of one. */
  readonly ca: string
  /** A server certificate for `localhost` and 127.0.0.1, from the CA. */
  readonly server: PemFiles
  /** A client certificate from the CA. */
  readonly client: PemFiles
  /** Issues another certificate named `name` into the folder. */
  issue(name: string, options?: IssueOptions): Promise<PemFiles>
}

/** A CA and a few certificates in `dir` (a test's own folder), made at test time; elliptic-curve keys, fast to make. */
export async function makePki(dir: string): Promise<TestPki> {
  const key = (name: string) =>
    openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`])
  await key('ca')
  await openssl(dir, [
    'req',
    '-x509',
    '-new',
    '-key',
    'ca.key',
    '-subj',
    '/CN=payments-gate test CA',
    '-days',
    '2',
    '-out',
    'ca.pem',
  ])
  async function issue(name: string, options: IssueOptions = {}): Promise<PemFiles> {
    await key(name)
    const extensions = [
      `subjectAltName=${options.names ?? 'DNS:localhost,IP:127.0.0.1'}`,
      `extendedKeyUsage=${options.client === true ? 'clientAuth' : 'serverAuth'}`,
    ]
    await writeFile(join(dir, `${name}.ext`), `${extensions.join('\n')}\n`)
    await openssl(dir, ['req', '-new', '-key', `${name}.key`, '-subj', `/CN=${name}`, '-out', `${name}.csr`])
    if (options.startsInDays !== undefined) {
      await writeFile(
        join(dir, `${name}.cnf`),
        '[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\ndefault_md = sha256\npolicy = any\n[any]\ncommonName = supplied\n',
      )
      await writeFile(join(dir, 'index.txt'), '')
      await writeFile(join(dir, 'serial'), `${Date.now().toString(16).padStart(12, '0')}\n`)
      await openssl(dir, [
        'ca',
        '-batch',
        '-notext',
        '-config',
        `${name}.cnf`,
        '-cert',
        'ca.pem',
        '-keyfile',
        'ca.key',
        '-in',
        `${name}.csr`,
        '-startdate',
        opensslTime(options.startsInDays),
        '-enddate',
        opensslTime(options.startsInDays + 1),
        '-extfile',
        `${name}.ext`,
        '-out',
        `${name}.pem`,
      ])
      return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) }
    }
    const signer = options.selfSigned === true ? ['-signkey', `${name}.key`] : ['-CA', 'ca.pem', '-CAkey', 'ca.key']
    await openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      ...signer,
      '-days',
      String(options.days ?? 2),
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    ])
    return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) }
  }
  const server = await issue('server')
  const client = await issue('client', { client: true })
  return { dir, ca: join(dir, 'ca.pem'), server, client, issue }
}
