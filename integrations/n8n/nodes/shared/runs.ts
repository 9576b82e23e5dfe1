// The testing API's run bodies (POST /api/testing/runs).
import type { IDataObject } from 'n8n-workflow';

import { ApiError } from './api';

/** The body that starts a run: empty optional fields left out. */
export function runStartBody(scenarioId: string, mode: string, fields: IDataObject): IDataObject {
	const id = (scenarioId ?? '').trim();
	if (!id) throw new ApiError('Scenario ID is empty', undefined, undefined);
	const body: IDataObject = { scenarioId: id };
	if (mode) body.mode = mode;
	for (const name of ['variant', 'label', 'revision', 'patientDriver']) {
		const value = fields[name];
		if (typeof value === 'string' && value.trim()) body[name] = value.trim();
	}
	const timeout = Number(fields.timeoutSeconds ?? 0);
	if (timeout > 0) body.timeoutSeconds = Math.round(timeout);
	return body;
}
