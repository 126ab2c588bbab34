// TensorBoard's event files, as torch.utils.tensorboard: the SummaryWriter
// (summary_writer.h) over TFRecord event files (event_file.h) with their CRC-32C
// (crc32c.h), histograms (histogram.h) and the protobuf encoding they need (protobuf_writer.h).
#pragma once

#include "train/tensorboard/crc32c.h"
#include "train/tensorboard/event_file.h"
#include "train/tensorboard/histogram.h"
#include "train/tensorboard/summary_writer.h"
