// Standard Webhooks signatures (https://www.standardwebhooks.com/): what Understudy signs
// every delivery with. HMAC-SHA256 over `${webhook-id}.${webhook-timestamp}.${raw body}`,
// keyed with the base64-decoded bytes of the secret after its `whsec_` prefix; the
// `webhook-signature` header lists one or more space-separated `v1,<base64>` signatures.
import { createHmac, timingSafeEqual } from 'crypto';

/** How far a delivery's timestamp may be from now, either way (the spec's default). */
export const DEFAULT_TOLERANCE_SECONDS = 5 * 60;

export type HeaderValue = string | string[] | undefined;

export type VerifyResult = { ok: true } | { ok: false; reason: string };

/** The key bytes of a secret: base64, optionally prefixed `whsec_`. */
export function secretKey(secret: string): Buffer {
	const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
	const key = Buffer.from(encoded, 'base64');
	if (key.length === 0) throw new Error('the webhook secret is empty or not base64');
	return key;
}

function toBuffer(body: Buffer | string): Buffer {
	return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}

/** The `v1,<base64>` signature of one message (what a sender puts in webhook-signature). */
export function sign(
	secret: string,
	messageId: string,
	timestamp: number | string,
	body: Buffer | string,
): string {
	const mac = createHmac('sha256', secretKey(secret));
	mac.update(`${messageId}.${timestamp}.`, 'utf8');
	mac.update(toBuffer(body));
	return `v1,${mac.digest('base64')}`;
}

/** One header's value from Node's (lower-cased) header object, whatever case is asked. */
export function header(headers: Record<string, HeaderValue>, name: string): string | undefined {
	const wanted = name.toLowerCase();
	for (const [key, value] of Object.entries(headers)) {
		if (key.toLowerCase() !== wanted) continue;
		return Array.isArray(value) ? value.join(' ') : value;
	}
	return undefined;
}

/**
 * Check a delivery: its three webhook-* headers, the raw body as received (the exact bytes:
 * a body parsed and serialized again would not match), the secret. `now` in seconds.
 */
export function verifySignature(options: {
	secret: string;
	headers: Record<string, HeaderValue>;
	body: Buffer | string;
	now?: number;
	toleranceSeconds?: number;
}): VerifyResult {
	const { secret, headers, body } = options;
	const now = options.now ?? Math.floor(Date.now() / 1000);
	const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
	const id = header(headers, 'webhook-id');
	const timestamp = header(headers, 'webhook-timestamp');
	const signatures = header(headers, 'webhook-signature');
	if (!id || !timestamp || !signatures) {
		return { ok: false, reason: 'missing webhook-id, webhook-timestamp or webhook-signature' };
	}
	if (!/^\d{1,15}$/.test(timestamp.trim())) {
		return { ok: false, reason: 'webhook-timestamp is not a number of seconds' };
	}
	const sentAt = Number(timestamp.trim());
	if (Math.abs(now - sentAt) > tolerance) {
		return {
			ok: false,
			reason: `webhook-timestamp is ${Math.abs(now - sentAt)} s off (more than ${tolerance} s)`,
		};
	}
	let expected: Buffer;
	try {
		expected = Buffer.from(sign(secret, id, timestamp.trim(), body).slice('v1,'.length), 'base64');
	} catch (error) {
		return { ok: false, reason: (error as Error).message };
	}
	for (const candidate of signatures.split(' ')) {
		const [version, encoded] = candidate.split(',', 2);
		if (version !== 'v1' || !encoded) continue;
		const given = Buffer.from(encoded, 'base64');
		if (given.length === expected.length && timingSafeEqual(given, expected)) return { ok: true };
	}
	return { ok: false, reason: 'no webhook-signature matches' };
}
