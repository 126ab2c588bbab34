// The data pipeline in one include: datasets, samplers, the DataLoader, text (tokenizer,
// vocabulary, labelled-text readers, padding collate) and time series (CSV columns,
// sliding windows, normalisation).
#pragma once

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/read_report.h"
#include "data/sampler.h"
#include "data/text_dataset.h"
#include "data/text_readers.h"
#include "data/timeseries.h"
#include "data/worker_info.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
